-- Queries for the DataFusion engine (`ringscan query --engine datafusion`), checked
-- against DuckDB by check.py like corpus.sql. Not yet run by the test suite: the
-- engine is opt-in until the whole corpus passes on it (issue 16).
-- Full SQL (DataFusion plans, the daemon scans): joins of every kind, semi and anti
-- joins, IN / NOT IN subqueries with NULLs, scalar and correlated subqueries, CTEs
-- (recursive too), set operations, window functions, CASE, LIKE, functions, integer
-- division as DuckDB does it. Windows' ORDER BY makes the comparison ordered, so each
-- such query ends in an ORDER BY on unique keys.
SELECT p.id, p.price AS p_price, d.price AS d_price FROM pa_trades p JOIN duck_trades d ON p.id = d.id WHERE p.price > 110 ORDER BY p.id LIMIT 20;
SELECT count(*), sum(d.qty) FROM pa_trades p JOIN duck_trades d ON p.id = d.id AND p.side = d.side;
SELECT count(*), count(d.id) FROM pa_trades p LEFT JOIN duck_trades d ON p.id = d.id AND d.qty > 2500;
SELECT count(*), count(p.id), count(d.id) FROM pa_trades p RIGHT JOIN duck_trades d ON p.id = d.id AND p.price > 105;
SELECT count(*), count(p.id), count(d.id) FROM pa_trades p FULL OUTER JOIN duck_trades d ON p.id = d.id + 5000;
SELECT a.symbol AS a_symbol, b.symbol AS b_symbol, count(*) FROM ohlcv a CROSS JOIN (SELECT DISTINCT symbol FROM ohlcv_part) b WHERE a.close > 474 GROUP BY 1, 2;
SELECT count(*) FROM (SELECT symbol, max(close) AS m FROM ohlcv GROUP BY symbol) t JOIN (SELECT symbol, min(close) AS n FROM ohlcv_part GROUP BY symbol) u USING (symbol);
SELECT w.region, count(*), sum(w.total) FROM wide w JOIN (SELECT DISTINCT customer_id FROM wide WHERE is_priority) c ON w.customer_id = c.customer_id GROUP BY w.region;
SELECT count(*) FROM pa_trades p WHERE EXISTS (SELECT 1 FROM duck_trades d WHERE d.id = p.id AND d.side = 'sell');
SELECT count(*) FROM pa_trades p WHERE NOT EXISTS (SELECT 1 FROM duck_trades d WHERE d.id = p.id AND d.qty > 100);
SELECT count(*) FROM pa_trades WHERE qty IN (SELECT qty FROM duck_trades WHERE venue = 'BATS');
SELECT count(*) FROM pa_trades WHERE qty NOT IN (SELECT qty FROM duck_trades WHERE venue = 'BATS' AND qty > 4000);
SELECT count(*) FROM pa_trades WHERE side NOT IN (SELECT side FROM duck_trades);
SELECT count(*) FROM pa_trades WHERE side NOT IN (SELECT side FROM duck_trades WHERE side IS NOT NULL AND side <> 'buy');
SELECT count(*) FROM pa_trades WHERE side IN (SELECT side FROM duck_trades);
SELECT id, price FROM pa_trades WHERE price > (SELECT avg(price) FROM duck_trades) ORDER BY price DESC, id LIMIT 10;
SELECT side, (SELECT count(*) FROM duck_trades d WHERE d.side = p.side) AS n FROM (SELECT DISTINCT side FROM pa_trades) p;
SELECT id, qty FROM pa_trades p WHERE qty > (SELECT avg(qty) FROM pa_trades q WHERE q.venue = p.venue) ORDER BY id LIMIT 15;
WITH s AS (SELECT symbol, avg(close) AS c FROM ohlcv GROUP BY symbol) SELECT symbol, c FROM s WHERE c > (SELECT avg(c) FROM s);
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 10) SELECT sum(i), count(*) FROM n;
WITH big AS (SELECT * FROM wide WHERE total > 450), small AS (SELECT * FROM wide WHERE total < 20) SELECT (SELECT count(*) FROM big) AS b, (SELECT count(*) FROM small) AS s;
SELECT side FROM pa_trades UNION SELECT side FROM duck_trades;
SELECT venue FROM pa_trades WHERE price > 115 UNION ALL SELECT venue FROM duck_trades WHERE price > 115;
SELECT qty FROM pa_trades INTERSECT SELECT qty FROM duck_trades;
SELECT qty FROM pa_trades EXCEPT SELECT qty FROM duck_trades;
SELECT symbol, ts, close, row_number() OVER (PARTITION BY symbol ORDER BY ts) AS rn FROM ohlcv WHERE close > 474 ORDER BY symbol, ts;
SELECT symbol, ts, close - lag(close) OVER (PARTITION BY symbol ORDER BY ts) AS d FROM ohlcv_part WHERE symbol = 'SPY' ORDER BY ts LIMIT 20;
SELECT * FROM (SELECT region, order_id, total, rank() OVER (PARTITION BY region ORDER BY total DESC, order_id) AS r FROM wide) t WHERE r <= 3 ORDER BY region, r;
SELECT symbol, ts, avg(close) OVER (PARTITION BY symbol ORDER BY ts ROWS BETWEEN 4 PRECEDING AND CURRENT ROW) AS ma FROM ohlcv WHERE symbol = 'AAPL' ORDER BY ts LIMIT 30;
SELECT id, venue, sum(qty) OVER (PARTITION BY venue) AS s FROM duck_trades WHERE id < 50 ORDER BY id;
SELECT region, total, sum(total) OVER (ORDER BY order_id) AS running FROM wide WHERE order_id < 40 ORDER BY order_id;
SELECT CASE WHEN close > 470 THEN 'high' WHEN close > 450 THEN 'mid' ELSE 'low' END AS band, count(*) FROM ohlcv GROUP BY 1;
SELECT count(*) FROM wide WHERE notes LIKE '%a%';
SELECT count(*) FROM wide WHERE sales_rep ILIKE 'a%';
SELECT upper(region), lower(status), length(country), substr(category, 1, 3), concat(region, '-', channel) FROM wide ORDER BY order_id LIMIT 5;
SELECT abs(qty), round(price, 1), floor(price), ceil(price), sqrt(abs(qty)) FROM duck_trades WHERE id < 10 ORDER BY id;
SELECT extract(year FROM order_date) AS y, extract(month FROM order_date) AS m, count(*) FROM wide GROUP BY 1, 2;
SELECT order_id, order_date + INTERVAL '7 days' AS due FROM wide ORDER BY order_id LIMIT 5;
SELECT sum(quantity) / count(*), 7 / 2, count(*) / 3 FROM wide;
SELECT order_id, quantity / 4 AS q FROM wide ORDER BY order_id LIMIT 5;
SELECT coalesce(side, 'none') AS s, count(*) FROM pa_trades GROUP BY 1;
SELECT 0.06 + 0.01 = 0.07 AS exact;

-- Integer overflow: DuckDB sums into a HUGEINT and fails on overflowing arithmetic;
-- DataFusion would wrap both silently.
SELECT sum(x) AS s FROM (VALUES (9223372036854775807), (1)) t(x);
SELECT g, sum(v) AS s FROM (VALUES (1, 9223372036854775000), (1, 9223372036854775000), (2, -5)) t(g, v) GROUP BY g ORDER BY g;
SELECT x + 1 FROM (VALUES (9223372036854775807)) t(x);
SELECT x * 3 FROM (VALUES (4611686018427387904)) t(x);
SELECT x - 2 FROM (VALUES (-9223372036854775807)) t(x);
SELECT x + 1, x * 2, x - 3 FROM (VALUES (1), (2), (NULL)) t(x) ORDER BY x;

-- CAST to an integer rounds: doubles half to even, decimals half away from zero.
SELECT CAST(x AS BIGINT) AS c FROM (VALUES (2.5::DOUBLE), (3.5::DOUBLE), (-2.5::DOUBLE), (0.49::DOUBLE)) t(x) ORDER BY x;
SELECT CAST(x AS INTEGER) AS c FROM (VALUES (2.5), (3.5), (-2.5), (-2.4)) t(x) ORDER BY x;
SELECT g, sum(v) OVER (ORDER BY g ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS running FROM (VALUES (1, 9223372036854775000), (2, 9223372036854775000), (3, 7)) t(g, v) ORDER BY g;

-- A double meeting a decimal is a double (DataFusion would cast the double to
-- DECIMAL(30,15): an error on NaN, infinity and values past 10^15); exponent
-- literals are doubles.
SELECT x FROM (SELECT CAST('NaN' AS DOUBLE) AS x UNION ALL SELECT 0.5 UNION ALL SELECT CAST('1e300' AS DOUBLE) UNION ALL SELECT 2.25) t ORDER BY x;
SELECT coalesce(CAST('NaN' AS DOUBLE), 0.5) AS c, CASE WHEN 1 = 1 THEN CAST('inf' AS DOUBLE) ELSE 0.5 END AS k, greatest(CAST('1e300' AS DOUBLE), 0.5) AS g;
SELECT CAST('NaN' AS DOUBLE) > 0.5 AS a, CAST('1e300' AS DOUBLE) BETWEEN 0.5 AND 1.5 AS b, CAST('-inf' AS DOUBLE) IN (0.5, 2.5) AS c;
SELECT 1e3 AS a, 2.5e-3 AS b, -1E2 AS c, 1e300 > 0.5 AS d;
SELECT count(*) FROM ohlcv WHERE close BETWEEN 450.25 AND 460.75 OR close IN (455.5, 470.25);
SELECT symbol, min(close * 1.5) AS lo, max(close + 0.25) AS hi FROM ohlcv GROUP BY symbol ORDER BY symbol;
SELECT min(x) AS lo, max(x) AS hi FROM (VALUES (CAST('NaN' AS DOUBLE)), (CAST(-1 AS DOUBLE)), (CAST(7 AS DOUBLE))) t(x);
SELECT x FROM (VALUES (CAST('NaN' AS DOUBLE)), (CAST(-1 AS DOUBLE)), (CAST('-inf' AS DOUBLE))) t(x) ORDER BY x DESC;
-- Non-finite literals stay in the plan (the daemon's messages are JSON, which has none).
SELECT count(*) AS n FROM ohlcv WHERE close < CAST('inf' AS DOUBLE) AND close <> CAST('NaN' AS DOUBLE);
-- avg of a decimal: an exact 128-bit sum divided once, a DOUBLE (grouped with NULL
-- values and keys, FILTER, no rows, DISTINCT, a window, 38 digits).
SELECT side, avg(CAST(price AS DECIMAL(12,4))) AS a, count(*) AS n FROM pa_trades GROUP BY side ORDER BY side NULLS FIRST;
SELECT venue, avg(CAST(price AS DECIMAL(12,4))) FILTER (WHERE qty > 1000) AS a FROM pa_trades GROUP BY venue ORDER BY venue;
SELECT avg(CAST(price AS DECIMAL(12,4))) AS a, avg(CAST(qty AS DECIMAL(9,0))) AS q FROM pa_trades WHERE id < 0;
SELECT avg(CAST(price AS DECIMAL(12,4))) AS a, avg(DISTINCT CAST(qty AS DECIMAL(9,0))) AS q FROM duck_trades;
SELECT avg(CAST(price AS DECIMAL(38,10)) * 1000000000000) AS big FROM pa_trades;
SELECT id, avg(CAST(price AS DECIMAL(12,4))) OVER (ORDER BY id ROWS BETWEEN 3 PRECEDING AND CURRENT ROW) AS ma FROM pa_trades WHERE id < 40 ORDER BY id;
SELECT day, avg(CAST(qty AS DECIMAL(9,0))) AS a FROM duck_trades GROUP BY day HAVING count(*) > 100 ORDER BY day LIMIT 20;
-- An integer or short decimal literal added to a decimal (rescaled in the plan once).
SELECT sum(CAST(price AS DECIMAL(12,4)) * (1 - CAST(qty AS DECIMAL(9,2)) / 10000)) AS s FROM pa_trades;
SELECT min(1 - CAST(price AS DECIMAL(12,4))) AS a, max(CAST(price AS DECIMAL(12,4)) + 2.5) AS b, sum(7 + CAST(qty AS DECIMAL(9,2))) AS c FROM pa_trades;
SELECT sum(9223372036854775807 - CAST(qty AS DECIMAL(9,2))) AS s, min(CAST(price AS DECIMAL(36,4)) - 1) AS m FROM pa_trades;

-- The differential corpus: every query runs through ringscan (daemon -> ring -> executor)
-- and through DuckDB on the same files; the results must match (order-insensitive unless
-- the query has an ORDER BY, whose keys here always end in a unique column; floats within
-- a relative 1e-9). One query per statement, separated by semicolons.
-- Tables: ohlcv (100k bars, 2 files), ohlcv_part (hive by symbol), wide (50k x 21),
-- pa_trades (pyarrow: 3 files, snappy/zstd/none, dictionary on/off, page index on/off,
-- no statistics in one), duck_trades (DuckDB COPY, zstd, 2048-row groups). Both trades
-- tables have NULLs in most columns. hive_t: partitions year (BIGINT), day (DATE, one
-- directory `2024-1-5`), code (VARCHAR: `007`, `12`, `abc`, an escape, `NULL`), NULL
-- markers; floats_t: NaN of both signs, both zeros, the infinities, NULLs, 3-row groups.

-- ohlcv: filters, pushdown boundaries
SELECT count(*) FROM ohlcv;
SELECT count(*) FROM ohlcv WHERE close >= 480;
SELECT count(*) FROM ohlcv WHERE close > 450.0;
SELECT count(*) FROM ohlcv WHERE close > 449.9999;
SELECT count(*) FROM ohlcv WHERE close BETWEEN 440 AND 460 AND volume > 1000;
SELECT count(*) FROM ohlcv WHERE NOT (close < 450 OR close > 470);
SELECT symbol, ts, close FROM ohlcv WHERE close >= 472 ORDER BY symbol, ts;
SELECT symbol, ts, close FROM ohlcv WHERE symbol = 'SPY' ORDER BY ts LIMIT 20;
SELECT symbol, ts, close FROM ohlcv WHERE symbol IN ('AAPL', 'MSFT') AND close < 455 ORDER BY ts, symbol LIMIT 50 OFFSET 10;
SELECT count(*) FROM ohlcv WHERE symbol = 'NOPE';
SELECT * FROM ohlcv WHERE close > 1000000;
-- OFFSET without ORDER BY is in file order in both engines (DuckDB preserves insertion
-- order); ringscan skips the offset in the daemon, whole row groups when unfiltered.
SELECT symbol, ts, close FROM ohlcv LIMIT 5 OFFSET 99990;
SELECT symbol, ts, close FROM ohlcv LIMIT 7 OFFSET 49998;
SELECT symbol, ts FROM ohlcv WHERE close > 450 LIMIT 5 OFFSET 1000;
SELECT count(*) FROM ohlcv WHERE ts >= TIMESTAMP '2024-01-10 00:00:00' AND ts < TIMESTAMP '2024-01-11 00:00:00';
SELECT count(*) FROM ohlcv WHERE volume * 2 > 5000 OR close - open > 1;
-- ohlcv: aggregates
SELECT min(close), max(close), avg(close), sum(volume) FROM ohlcv;
SELECT symbol, count(*), min(low), max(high) FROM ohlcv GROUP BY symbol;
SELECT symbol, sum(close * volume) / sum(volume) AS vwap FROM ohlcv GROUP BY symbol ORDER BY symbol;
SELECT symbol, avg(close) FROM ohlcv WHERE close > 450 GROUP BY symbol HAVING count(*) > 100 ORDER BY symbol;
SELECT date_trunc('day', ts) AS d, count(*), max(close) FROM ohlcv GROUP BY date_trunc('day', ts) ORDER BY d LIMIT 10;
SELECT date_trunc('hour', ts) AS h, symbol, sum(volume) FROM ohlcv WHERE symbol = 'QQQ' GROUP BY 1, 2 ORDER BY h LIMIT 30;
SELECT count(DISTINCT symbol) FROM ohlcv;
SELECT count(*), count(DISTINCT symbol) FROM ohlcv WHERE close < 445;
SELECT DISTINCT symbol FROM ohlcv;
SELECT DISTINCT symbol FROM ohlcv WHERE close > 474;
-- ohlcv: top-k and pagination
SELECT symbol, ts, close FROM ohlcv ORDER BY close DESC, symbol, ts LIMIT 10;
SELECT symbol, ts, volume FROM ohlcv ORDER BY volume DESC, symbol, ts LIMIT 5 OFFSET 100;
SELECT symbol, ts FROM ohlcv ORDER BY ts DESC, symbol LIMIT 25;
SELECT symbol, ts, close FROM ohlcv WHERE close BETWEEN 455 AND 456 ORDER BY close, symbol, ts LIMIT 40;
SELECT close, volume FROM ohlcv ORDER BY close ASC, ts, symbol LIMIT 3 OFFSET 99990;
SELECT count(*) FROM ohlcv WHERE open > close AND high - low > 0.05;
-- partitioned table: partition columns queryable, pruning by partition
SELECT count(*) FROM ohlcv_part;
SELECT symbol, count(*) FROM ohlcv_part GROUP BY symbol;
SELECT count(*) FROM ohlcv_part WHERE symbol = 'SPY';
SELECT symbol, ts, close FROM ohlcv_part WHERE symbol IN ('META', 'GOOG') AND close > 460 ORDER BY ts, symbol LIMIT 30;
SELECT max(close), min(ts) FROM ohlcv_part WHERE symbol <> 'SPY';
SELECT DISTINCT symbol FROM ohlcv_part WHERE close < 445;
-- wide: seed-001 shapes
SELECT * FROM wide ORDER BY order_id LIMIT 20;
SELECT order_id, total FROM wide ORDER BY order_id LIMIT 20 OFFSET 180;
SELECT order_id, region, total FROM wide WHERE region = 'north' ORDER BY order_id LIMIT 50;
SELECT count(*) FROM wide WHERE total BETWEEN 100 AND 500;
SELECT count(*) FROM wide WHERE order_date >= DATE '2022-02-01' AND order_date < DATE '2022-03-01';
SELECT count(*) FROM wide WHERE status IN ('shipped', 'pending') AND channel = 'web' AND quantity > 3;
SELECT order_id, total FROM wide ORDER BY total DESC, order_id LIMIT 15;
SELECT order_id, order_date FROM wide ORDER BY order_date, order_id LIMIT 10 OFFSET 40;
SELECT order_id, status, total FROM wide WHERE region = 'east' AND total > 200 ORDER BY total DESC, order_id LIMIT 10 OFFSET 5;
SELECT region, count(*), sum(quantity), avg(unit_price) FROM wide GROUP BY region;
SELECT region, status, count(*) FROM wide GROUP BY region, status;
SELECT currency, max(total) - min(total) FROM wide WHERE is_priority GROUP BY currency;
SELECT count(*), count(ship_date), count(sales_rep), count(notes) FROM wide;
SELECT count(*) FROM wide WHERE ship_date IS NULL;
SELECT count(*) FROM wide WHERE notes IS NOT NULL AND is_gift;
SELECT sales_rep, count(*) FROM wide WHERE sales_rep IS NOT NULL GROUP BY sales_rep ORDER BY count(*) DESC, sales_rep LIMIT 5;
SELECT DISTINCT category, channel FROM wide;
SELECT count(DISTINCT customer_id) FROM wide;
SELECT category, sum(total * (1 - discount)) FROM wide GROUP BY category;
SELECT order_id, CAST(total AS BIGINT) FROM wide ORDER BY order_id LIMIT 5;
-- foreign writers: NULLs, no statistics, dictionary on/off
SELECT count(*), count(price), count(qty), count(side), count(flag), count(note) FROM pa_trades;
SELECT side, count(*), sum(qty), min(price), max(price) FROM pa_trades GROUP BY side;
SELECT count(*) FROM pa_trades WHERE price > 110;
SELECT count(*) FROM pa_trades WHERE price IS NULL OR qty IS NULL;
SELECT count(*) FROM pa_trades WHERE NOT (price > 100);
SELECT id, price, qty FROM pa_trades WHERE qty < 0 ORDER BY id LIMIT 20;
SELECT id, ts, day FROM pa_trades WHERE day = DATE '2024-03-02' ORDER BY id LIMIT 10;
SELECT venue, avg(price), count(*) FROM pa_trades WHERE side = 'buy' GROUP BY venue;
SELECT id, price FROM pa_trades ORDER BY price DESC NULLS LAST, id LIMIT 10;
SELECT id, price FROM pa_trades ORDER BY price ASC NULLS FIRST, id LIMIT 10;
SELECT DISTINCT side FROM pa_trades;
SELECT count(*) FROM pa_trades WHERE flag;
SELECT count(*) FROM pa_trades WHERE flag IS NULL;
SELECT note, count(*) FROM pa_trades WHERE note IN ('n001', 'n500', 'n999') GROUP BY note;
SELECT count(*) FROM duck_trades;
SELECT side, venue, count(*), sum(qty) FROM duck_trades GROUP BY side, venue;
SELECT count(*) FROM duck_trades WHERE id BETWEEN 1000 AND 1999 AND price > 100;
SELECT id, price, side FROM duck_trades WHERE side IS NULL ORDER BY id LIMIT 15;
SELECT date_trunc('day', ts) AS d, count(*) FROM duck_trades GROUP BY 1 ORDER BY d;
SELECT id, qty * 2 + 1 AS q FROM duck_trades WHERE qty > 4990 ORDER BY id;
SELECT min(ts), max(ts), min(day), max(day) FROM duck_trades;
SELECT avg(qty), sum(price) FROM duck_trades WHERE venue = 'BATS';
-- answered from Parquet statistics where exact (issue 5), else scanned: same answers
SELECT count(*), min(close), min(ts), max(ts), min(symbol), max(symbol), min(volume), max(volume) FROM ohlcv;
SELECT max(order_id) - min(order_id) AS span, count(*) * 2 AS twice FROM wide;
SELECT count(*), min(ts), max(close), min(symbol) FROM ohlcv_part;
SELECT count(*), min(order_id), max(order_id), min(order_date), max(order_date), min(total), count(ship_date) FROM wide;
SELECT count(*), count(price), min(qty), max(qty), min(price), min(note), max(note), min(side) FROM duck_trades;
SELECT min(id), max(id), count(qty), min(side), max(venue), min(ts), max(day) FROM pa_trades;
-- top-k late materialization (a first scan of the sort key, then the rows bounded by its
-- k-th value): NULLs first and last, ties on the first key, strings, a residual filter
SELECT * FROM pa_trades ORDER BY price DESC NULLS FIRST, id LIMIT 12;
SELECT * FROM pa_trades ORDER BY price ASC NULLS LAST, id LIMIT 9 OFFSET 3;
SELECT * FROM pa_trades ORDER BY qty DESC, id LIMIT 8;
SELECT * FROM duck_trades ORDER BY side DESC, id LIMIT 7;
SELECT * FROM wide ORDER BY status, order_id LIMIT 30 OFFSET 500;
SELECT * FROM wide WHERE total * 2 > 1500 ORDER BY order_date DESC, order_id LIMIT 25;
SELECT * FROM ohlcv ORDER BY volume, symbol, ts LIMIT 20;
-- DISTINCT with duplicates dropped in the daemon per row group (strings read as
-- dictionaries): several columns, NULLs, expressions over the rows, DISTINCT then
-- ORDER BY and LIMIT, dictionary on and off in the foreign files
SELECT DISTINCT side, venue FROM pa_trades;
SELECT DISTINCT note FROM pa_trades WHERE price > 105;
SELECT DISTINCT side, venue FROM duck_trades ORDER BY side NULLS FIRST, venue NULLS FIRST;
SELECT DISTINCT qty FROM duck_trades WHERE qty > 4900 ORDER BY qty LIMIT 20;
SELECT DISTINCT status, region, channel FROM wide ORDER BY status, region, channel LIMIT 12 OFFSET 3;
SELECT DISTINCT date_trunc('day', ts) AS d FROM ohlcv ORDER BY d;
SELECT DISTINCT symbol FROM ohlcv_part;
SELECT DISTINCT is_priority, currency FROM wide WHERE total > 400;
SELECT DISTINCT flag FROM pa_trades;

-- hive partitions typed as DuckDB types them (year BIGINT, day DATE, code VARCHAR): the
-- filters prune directories and give DuckDB's rows
SELECT year, day, code, count(*) AS n, min(id) AS first_id FROM hive_t GROUP BY year, day, code ORDER BY year, day, code;
SELECT count(*) FROM hive_t WHERE year = 2024;
SELECT count(*) FROM hive_t WHERE year < 2024;
SELECT count(*) FROM hive_t WHERE year >= 2023 AND year <= 2024;
SELECT count(*) FROM hive_t WHERE year IS NULL;
SELECT count(*) FROM hive_t WHERE year IS NOT NULL AND NOT (year = 2024);
SELECT count(*) FROM hive_t WHERE day >= DATE '2024-01-01';
SELECT count(*) FROM hive_t WHERE day = DATE '2024-01-05';
SELECT count(*) FROM hive_t WHERE day < '2024-01-06';
SELECT count(*) FROM hive_t WHERE day IS NULL;
SELECT count(*) FROM hive_t WHERE code = '007';
SELECT count(*) FROM hive_t WHERE code = '12';
SELECT count(*) FROM hive_t WHERE code = 'NULL';
SELECT count(*) FROM hive_t WHERE code = 'x/y';
SELECT sum(year) AS s, min(day) AS d, max(day) AS e, min(code) AS c FROM hive_t;
SELECT year + 1 AS y, day FROM hive_t WHERE id = 60;
SELECT id, year, day FROM hive_t WHERE year = 2024 AND v > 0.5 ORDER BY id LIMIT 5;
SELECT count(*) FROM hive_t WHERE day = ' 2024-1-5 ';
SELECT DATE '2024-1-5' AS d, CAST(' 2024-01-05 ' AS DATE) AS e, CAST('2024/01/05' AS DATE) AS f;
-- floats as DuckDB compares them: -0.0 = 0.0, NaN = NaN and above +inf, integers below
-- NaN; pushed down, pruned by statistics and page index, or evaluated in the engine
SELECT count(*) FROM floats_t WHERE x = 0.0;
SELECT count(*) FROM floats_t WHERE x = -0.0;
SELECT count(*) FROM floats_t WHERE x < 1;
SELECT count(*) FROM floats_t WHERE x <= 0;
SELECT count(*) FROM floats_t WHERE x > 1;
SELECT count(*) FROM floats_t WHERE x >= 0;
SELECT count(*) FROM floats_t WHERE x <> 1.5;
SELECT count(*) FROM floats_t WHERE NOT (x < 2);
SELECT count(*) FROM floats_t WHERE x = CAST('NaN' AS DOUBLE);
SELECT count(*) FROM floats_t WHERE x > CAST('inf' AS DOUBLE);
SELECT count(*) FROM floats_t WHERE x < CAST('NaN' AS DOUBLE);
SELECT count(*) FROM floats_t WHERE x >= CAST('-inf' AS DOUBLE);
SELECT count(*) FROM floats_t WHERE i < CAST('NaN' AS DOUBLE);
SELECT count(*) FROM floats_t WHERE i >= CAST('NaN' AS DOUBLE);
SELECT count(*) FROM floats_t WHERE f > 1;
SELECT count(*) FROM floats_t WHERE f = 0;
SELECT id FROM floats_t WHERE x BETWEEN -1 AND 1 ORDER BY id;
SELECT id FROM floats_t WHERE x IN (0.0, 1.5) ORDER BY id;
SELECT id FROM floats_t WHERE x > 2 OR i = -7 ORDER BY id;
SELECT x, count(*) AS n FROM floats_t GROUP BY x ORDER BY x;

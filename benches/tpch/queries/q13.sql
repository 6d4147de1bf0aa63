-- TPC-H Q13: Customer Distribution. Validation parameters: WORD1 = special, WORD2 = requests.
-- The derived table names its columns inside (count(o_orderkey) as c_count) rather than
-- with the spec's column alias list `as c_orders (c_custkey, c_count)`: same query.
select
    c_count,
    count(*) as custdist
from
    (
        select
            c_custkey,
            count(o_orderkey) as c_count
        from
            customer left outer join orders on
                c_custkey = o_custkey
                and o_comment not like '%special%requests%'
        group by
            c_custkey
    ) as c_orders
group by
    c_count
order by
    custdist desc,
    c_count desc;

-- TPC-C New-Order (clause 2.4) for pgbench (-D warehouses=W): the client's home
-- warehouse, a district, a customer by NURand(1023, 1, 3000) with the run's constant 259,
-- 5 to 15 lines; 1% of orders end in the unused item and roll back.
\set w :client_id % :warehouses + 1
\set d random(1, 10)
\set c 1 + ((random(0, 1023) | random(1, 3000)) + 259) % 3000
\set ol_cnt random(5, 15)
\set rbk random(1, 100)
BEGIN;
SELECT tpcc_new_order(:w, :d, :c, :ol_cnt, :rbk, :warehouses) AS placed \gset
\if :placed = 1
COMMIT;
\else
ROLLBACK;
\endif

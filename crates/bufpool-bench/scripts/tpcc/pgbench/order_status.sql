-- TPC-C Order-Status (clause 2.6): reads only; 60% by last name.
\set w :client_id % :warehouses + 1
\set d random(1, 10)
\set byname 1 - random(1, 100) / 61
\set c 1 + ((random(0, 1023) | random(1, 3000)) + 259) % 3000
\set last ((random(0, 255) | random(0, 999)) + 87) % 1000
SELECT tpcc_order_status(:w, :d, :c, :byname, :last);

-- TPC-C Payment (clause 2.5): 85% a customer of the home district, 15% of another
-- warehouse's; 60% by last name (NURand(255, 0, 999) with the run's constant 87).
\set w :client_id % :warehouses + 1
\set d random(1, 10)
\set remote random(1, 100) / 86
\if :warehouses > 1 and :remote = 1
\set c_w 1 + (:w + random(0, :warehouses - 2)) % :warehouses
\set c_d random(1, 10)
\else
\set c_w :w
\set c_d :d
\endif
\set byname 1 - random(1, 100) / 61
\set c 1 + ((random(0, 1023) | random(1, 3000)) + 259) % 3000
\set last ((random(0, 255) | random(0, 999)) + 87) % 1000
\set cents random(100, 500000)
SELECT tpcc_payment(:w, :d, :c_w, :c_d, :c, :byname, :last, :cents);

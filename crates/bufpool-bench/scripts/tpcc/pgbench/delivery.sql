-- TPC-C Delivery (clause 2.7): the oldest undelivered order of each of the home
-- warehouse's ten districts.
\set w :client_id % :warehouses + 1
\set carrier random(1, 10)
SELECT tpcc_delivery(:w, :carrier);

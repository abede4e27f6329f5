-- TPC-C Stock-Level (clause 2.8): reads only.
\set w :client_id % :warehouses + 1
\set d random(1, 10)
\set threshold random(10, 20)
SELECT tpcc_stock_level(:w, :d, :threshold);

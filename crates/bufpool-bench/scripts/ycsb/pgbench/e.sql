-- YCSB workload E: scan 95% (1 to 100 records from a Zipfian record on, in key order),
-- insert 5% (as workload D's).
\set op random(1, 100)
\if :op <= 95
\set len random(1, 100)
SELECT field0, field1, field2, field3, field4, field5, field6, field7, field8, field9
  FROM usertable WHERE ycsb_key >= 'user' || :h ORDER BY ycsb_key LIMIT :len;
\else
SELECT nextval('ycsb_next') AS k \gset
\set hk abs(hash_fnv1a(:k, 0))
INSERT INTO usertable VALUES ('user' || :hk, ycsb_field(), ycsb_field(), ycsb_field(),
  ycsb_field(), ycsb_field(), ycsb_field(), ycsb_field(), ycsb_field(), ycsb_field(),
  ycsb_field());
\set count greatest(:count, :k + 1 - :clients)
\endif

-- YCSB workload D: read 95% (the latest distribution), insert 5% (the next record number
-- from the sequence ycsb_next; this client's count of records then rises to it, less the
-- inserts other clients may still have in flight).
\set op random(1, 100)
\if :op <= 95
SELECT field0, field1, field2, field3, field4, field5, field6, field7, field8, field9
  FROM usertable WHERE ycsb_key = 'user' || :h;
\else
SELECT nextval('ycsb_next') AS k \gset
\set hk abs(hash_fnv1a(:k, 0))
INSERT INTO usertable VALUES ('user' || :hk, ycsb_field(), ycsb_field(), ycsb_field(),
  ycsb_field(), ycsb_field(), ycsb_field(), ycsb_field(), ycsb_field(), ycsb_field(),
  ycsb_field());
\set count greatest(:count, :k + 1 - :clients)
\endif

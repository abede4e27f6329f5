-- YCSB workloads D and E (the peer script sets -D scan): 95% a read of every field (D,
-- scan=0, its record from the latest distribution) or a scan of 1 to 100 records in key
-- order from a Zipfian record on (E, scan=1); 5% an insert, its record number the next
-- from the sequence ycsb_next (this client's count of records then rises to it, less the
-- inserts other clients may still have in flight); one operation per transaction.
\set op random(1, 100)
\if :op <= 95
\if :scan
\set len random(1, 100)
SELECT field0, field1, field2, field3, field4, field5, field6, field7, field8, field9
  FROM usertable WHERE ycsb_key >= 'user' || :h ORDER BY ycsb_key LIMIT :len;
\else
SELECT field0, field1, field2, field3, field4, field5, field6, field7, field8, field9
  FROM usertable WHERE ycsb_key = 'user' || :h;
\endif
\else
SELECT nextval('ycsb_next') AS k \gset
\set hk abs(hash_fnv1a(:k, 0))
INSERT INTO usertable VALUES ('user' || :hk, ycsb_field(), ycsb_field(), ycsb_field(),
  ycsb_field(), ycsb_field(), ycsb_field(), ycsb_field(), ycsb_field(), ycsb_field(),
  ycsb_field());
\set count greatest(:count, :k + 1 - :clients)
\endif

-- YCSB workload F: read 50%, read-modify-write 50% (the read and the update of one field
-- in one transaction).
\set op random(1, 100)
\if :op <= 50
SELECT field0, field1, field2, field3, field4, field5, field6, field7, field8, field9
  FROM usertable WHERE ycsb_key = 'user' || :h;
\else
BEGIN;
SELECT field0, field1, field2, field3, field4, field5, field6, field7, field8, field9
  FROM usertable WHERE ycsb_key = 'user' || :h;
\set f random(0, 9)
UPDATE usertable SET
  field0 = CASE WHEN :f = 0 THEN ycsb_field() ELSE field0 END,
  field1 = CASE WHEN :f = 1 THEN ycsb_field() ELSE field1 END,
  field2 = CASE WHEN :f = 2 THEN ycsb_field() ELSE field2 END,
  field3 = CASE WHEN :f = 3 THEN ycsb_field() ELSE field3 END,
  field4 = CASE WHEN :f = 4 THEN ycsb_field() ELSE field4 END,
  field5 = CASE WHEN :f = 5 THEN ycsb_field() ELSE field5 END,
  field6 = CASE WHEN :f = 6 THEN ycsb_field() ELSE field6 END,
  field7 = CASE WHEN :f = 7 THEN ycsb_field() ELSE field7 END,
  field8 = CASE WHEN :f = 8 THEN ycsb_field() ELSE field8 END,
  field9 = CASE WHEN :f = 9 THEN ycsb_field() ELSE field9 END
  WHERE ycsb_key = 'user' || :h;
COMMIT;
\endif

-- YCSB workloads A, B, C and F (the peer script sets -D read_pct and -D rmw): a read of
-- every field with probability read_pct/100 (A 50, B 95, C 100, F 50), else an update of
-- one field, which F makes a read-modify-write (rmw=1: the read and the update in one
-- transaction); one operation per transaction.
\set op random(1, 100)
\if :op <= :read_pct
SELECT field0, field1, field2, field3, field4, field5, field6, field7, field8, field9
  FROM usertable WHERE ycsb_key = 'user' || :h;
\else
\if :rmw
BEGIN;
SELECT field0, field1, field2, field3, field4, field5, field6, field7, field8, field9
  FROM usertable WHERE ycsb_key = 'user' || :h;
\endif
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
\if :rmw
COMMIT;
\endif
\endif

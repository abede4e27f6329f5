-- YCSB workload C: read 100%.
SELECT field0, field1, field2, field3, field4, field5, field6, field7, field8, field9
  FROM usertable WHERE ycsb_key = 'user' || :h;

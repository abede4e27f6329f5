-- A record drawn by YCSB's latest distribution (workload D), for the workload's script
-- (the peer script puts this before it): a Zipfian rank from 1 to N (as zipfian.sql
-- draws it) counted back from the newest record this client knows of (-D count=N, raised
-- by its inserts); h is the record's key after `user`.
\set u random(0, 999999999) / 1000000000.0
\set rank case when :u * :zetan < 1.0 then 1 when :u * :zetan < :zeta2 then 2 else 1 + int(:records * pow(:eta * :u - :eta + 1.0, :alpha)) end
\set keynum :count - 1 - least(:rank - 1, :count - 1)
\set h abs(hash_fnv1a(:keynum, 0))

-- A record drawn by YCSB's Zipfian distribution, for the workloads' scripts (the peer
-- script puts this before them): a rank from 1 to N (Gray et al.'s method, as YCSB's
-- ZipfianGenerator draws it, with the constants pg-ycsb.sql computed: -D records=N,
-- zetan, zeta2, alpha, eta), hashed onto the records that exist (-D count=N, raised by
-- this client's inserts) as YCSB's scrambled Zipfian and bufpool's do; h is the record's
-- key after `user`.
\set u random(0, 999999999) / 1000000000.0
\set rank case when :u * :zetan < 1.0 then 1 when :u * :zetan < :zeta2 then 2 else 1 + int(:records * pow(:eta * :u - :eta + 1.0, :alpha)) end
\set keynum abs(hash_fnv1a(:rank, 0)) % :count
\set h abs(hash_fnv1a(:keynum, 0))

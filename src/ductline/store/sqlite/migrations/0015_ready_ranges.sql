-- 0015: PostgreSQL moves its claimable-queues walk into a function (its planner would
-- otherwise JIT-compile every claim); SQLite's view stays as 0014 made it.
SELECT 1;

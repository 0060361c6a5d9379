-- 0015: the claimable queues without a plan cost that JIT-compiles every claim.
-- The queues of claimable jobs (queue, priority, phase) are the same walk down the
-- ready index as 0014's view, now inside a function.
DROP VIEW ductline_ready_queues;
-- A PL/pgSQL function (never inlined) behind the view: the planner takes its few
-- rows as given, where it would cost a recursive CTE at thousands of rows -- enough
-- to JIT-compile every claim (jit_above_cost), which costs far more than the claim.
-- STABLE: its queries read the snapshot of the statement that calls it.
CREATE FUNCTION ductline_ready_ranges() RETURNS TABLE (queue text, priority bigint, phase bigint)
LANGUAGE plpgsql STABLE ROWS 4 COST 20 AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH RECURSIVE names(name) AS (
        SELECT (SELECT j.queue FROM ductline_jobs j WHERE j.status = 'pending' AND j.throttled = 0
                ORDER BY j.queue LIMIT 1)
        UNION ALL
        SELECT (SELECT j.queue FROM ductline_jobs j
                WHERE j.status = 'pending' AND j.throttled = 0 AND j.queue > names.name
                ORDER BY j.queue LIMIT 1)
        FROM names WHERE names.name IS NOT NULL
    ), levels(name, level) AS (
        SELECT names.name, (SELECT j.priority FROM ductline_jobs j
                            WHERE j.status = 'pending' AND j.throttled = 0 AND j.queue = names.name
                            ORDER BY j.priority DESC LIMIT 1)
        FROM names WHERE names.name IS NOT NULL
        UNION ALL
        SELECT levels.name, (SELECT j.priority FROM ductline_jobs j
                             WHERE j.status = 'pending' AND j.throttled = 0 AND j.queue = levels.name
                               AND j.priority < levels.level
                             ORDER BY j.priority DESC LIMIT 1)
        FROM levels WHERE levels.level IS NOT NULL
    )
    SELECT levels.name, levels.level, phases.p
    FROM levels CROSS JOIN (VALUES (0::bigint), (1::bigint)) AS phases(p)
    WHERE levels.level IS NOT NULL;
END
$$;
CREATE VIEW ductline_ready_queues AS
SELECT ranges.queue, ranges.priority, ranges.phase FROM ductline_ready_ranges() AS ranges;

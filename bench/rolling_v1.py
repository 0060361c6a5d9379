"""Version 1 of pipeline "rolling" (bench/rolling_deploy.py): a -> b -> c, c 20 s after b
(a run stays in flight across a wave of the deploy)."""

from rolling_steps import a, b, c

from ductline import Pipeline

rolling = Pipeline("rolling").start(a).chain(to=b).chain(to=c, delay=20)

"""Version 2 of pipeline "rolling" (bench/rolling_deploy.py): b renamed b2."""

from rolling_steps import a, b2, c

from ductline import Pipeline

rolling = Pipeline("rolling").start(a).chain(to=b2).chain(to=c, delay=20)

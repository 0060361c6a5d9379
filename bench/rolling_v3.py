"""Version 3 of pipeline "rolling" (bench/rolling_deploy.py): step d added after c."""

from rolling_steps import a, b2, c, d

from ductline import Pipeline

rolling = Pipeline("rolling").start(a).chain(to=b2).chain(to=c, delay=20).chain(to=d)

"""Write a run bundle and a study folder with the workbench of commit 71863f9 (before the layout move):

git worktree add /tmp/oldwb 71863f9
WORKBENCH_HISTORY=off PYTHONPATH=/tmp/oldwb python tests/data/old_layout/make_old_layout.py tests/data/old_layout
git worktree remove /tmp/oldwb
"""

import sys

import workbench as wb

assert wb.__file__.startswith("/tmp/oldwb/"), wb.__file__
from workbench import demo  # the old module path: workbench.demo

out = sys.argv[1]


def make_inputs():
    return demo.make_inputs()


run = wb.profile(demo.workload, *demo.make_inputs(), warmup=1, repeat=3)
print(type(run).__module__)
run.save(f"{out}/run_bundle")
study = wb.Study("old-layout", folder=f"{out}/study")
study.set_baseline(demo.workload, demo.make_inputs, warmup=1, repeat=3)
print(study.baselines[-1].baseline_id, study.baselines[-1].callable_ref)

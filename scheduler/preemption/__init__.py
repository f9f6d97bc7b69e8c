"""Preemption (KEP-4832, asynchronous by default): the pure evaluator that picks a node
and victims inside the scheduling cycle, and the executor that makes the API calls in a
background task. The DefaultPreemption plugin (default_preemption.py, in this package:
it needs the executor, which the in-tree plugins below it may not import) wires them
into the framework; it runs Filter on node copies through the framework's FilterRunner
(framework/dry_run.py).

Public surface; the unit tests' in-memory stand-ins (ResourceFit, MemoryNominator) are in
tests/unit/helpers/preemption_fakes.py.
"""

from scheduler.preemption.evaluator import (
    Candidate,
    Decision,
    DryRun,
    DryRunError,
    Evaluation,
    Evaluator,
    FitCheck,
    NodeLike,
    NodeLookup,
    NominatedPods,
    VictimSelector,
    calculate_num_candidates,
    eligible_to_preempt,
    importance_key,
    pick_one_node,
    select_victims,
    split_by_pdb,
)
from scheduler.preemption.executor import (
    RESULT_ERROR,
    RESULT_SUCCESS,
    EventSink,
    ExecutorSettings,
    PodWriter,
    PreemptionExecutor,
)

__all__ = [
    "RESULT_ERROR",
    "RESULT_SUCCESS",
    "Candidate",
    "Decision",
    "DryRun",
    "DryRunError",
    "Evaluation",
    "Evaluator",
    "EventSink",
    "ExecutorSettings",
    "FitCheck",
    "NodeLike",
    "NodeLookup",
    "NominatedPods",
    "PodWriter",
    "PreemptionExecutor",
    "VictimSelector",
    "calculate_num_candidates",
    "eligible_to_preempt",
    "importance_key",
    "pick_one_node",
    "select_victims",
    "split_by_pdb",
]

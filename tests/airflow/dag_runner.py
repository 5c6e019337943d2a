"""Run in a process of its own by tests/airflow (Airflow reads its configuration from the
environment when first imported): import the DAGs, then `dag.test()` some of them.

    python tests/airflow/dag_runner.py [RUNS_JSON]

Prints one JSON line: {"imported": the import errors, the DAGs' tasks and their spark-submit
command lines; "runs": each run's state, and each task's state and return value, by DAG id}.
RUNS_JSON lists the DAGs to test one after another in this one process (Airflow's start, a few
seconds of CPU, is paid once), each entry {"dag", "date", "params", "env"}: `env` is added to
the environment for that run (the spark-submit its steps start reads it)."""

from __future__ import annotations

import json
import os
import sys
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow.dag_processing.dagbag import DagBag


def main(argv: list[str]) -> None:
    from airflow.dag_processing.dagbag import DagBag

    folder = os.environ["AIRFLOW__CORE__DAGS_FOLDER"]
    sys.path.append(folder)  # as Airflow's processors do for a DAG bundle's folder
    bag = DagBag(dag_folder=folder)
    imported = _imported(bag)  # before any run renders a task
    runs = {}
    for entry in json.loads(argv[0]) if argv else []:
        saved = dict(os.environ)
        os.environ.update(entry.get("env", {}))
        try:
            runs[entry["dag"]] = _test(bag, entry["dag"], entry["date"], entry.get("params"))
        finally:
            os.environ.clear()
            os.environ.update(saved)
    print(json.dumps({"imported": imported, "runs": runs}, default=str))


def _imported(bag: DagBag) -> dict[str, Any]:
    """The import errors, each DAG's tasks, and the spark-submit command line of every
    spark-submit task (its templates not rendered)."""
    commands = {
        d: {
            t.task_id: t._get_hook()._build_spark_submit_command(t.application)
            for t in bag.dags[d].tasks
            if hasattr(t, "application")
        }
        for d in bag.dag_ids
    }
    return {
        "errors": {k: str(v) for k, v in bag.import_errors.items()},
        "dags": {d: [t.task_id for t in bag.dags[d].tasks] for d in bag.dag_ids},
        "commands": commands,
    }


def _test(bag: DagBag, dag_id: str, logical_date: str, params: dict[str, Any] | None) -> dict[str, Any]:
    """`dag.test()` of one DAG: the run's state, and each task's state and return value."""
    run = bag.get_dag(dag_id).test(logical_date=datetime.fromisoformat(logical_date), run_conf=params)
    states, values = {}, {}
    for ti in run.get_task_instances():
        states[ti.task_id] = str(ti.state) if ti.state is not None else None
        values[ti.task_id] = ti.xcom_pull(task_ids=ti.task_id) if ti.state == "success" else None
    return {"state": str(run.state), "tasks": states, "values": values}


if __name__ == "__main__":
    main(sys.argv[1:])

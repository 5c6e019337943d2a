"""Run in a process of its own by tests/airflow (Airflow reads its configuration from the
environment when first imported): import the DAGs, and `dag.test()` one of them.

    python tests/airflow/dag_runner.py import
    python tests/airflow/dag_runner.py test DAG_ID LOGICAL_DATE [PARAMS_JSON]
    python tests/airflow/dag_runner.py runs RUNS_JSON

Prints one JSON line: the import errors, the DAGs' tasks and their spark-submit command lines,
or the run's state and each task's state and return value; `runs` tests several DAGs one after
another in this one process (Airflow's start, a few seconds of CPU, paid once), each with the
environment variables its entry adds ({"dag", "date", "params", "env"}), and prints their
results by DAG id."""

from __future__ import annotations

import json
import os
import sys
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from airflow.dag_processing.dagbag import DagBag


def main(argv: list[str]) -> None:
    from airflow.dag_processing.dagbag import DagBag

    folder = os.environ["AIRFLOW__CORE__DAGS_FOLDER"]
    sys.path.append(folder)  # as Airflow's processors do for a DAG bundle's folder
    bag = DagBag(dag_folder=folder)
    if argv[0] == "import":
        errors = {k: str(v) for k, v in bag.import_errors.items()}
        tasks = {d: [t.task_id for t in bag.dags[d].tasks] for d in bag.dag_ids}
        # The spark-submit command line of every spark-submit task (its templates not rendered).
        commands = {
            d: {t.task_id: t._get_hook()._build_spark_submit_command(t.application)
                for t in bag.dags[d].tasks if hasattr(t, "application")}
            for d in bag.dag_ids
        }  # fmt: skip
        print(json.dumps({"errors": errors, "dags": tasks, "commands": commands}))
        return
    if argv[0] == "runs":
        results = {}
        for entry in json.loads(argv[1]):
            saved = dict(os.environ)
            os.environ.update(entry.get("env", {}))  # read by the spark-submit a step starts
            try:
                results[entry["dag"]] = _test(bag, entry["dag"], entry["date"], entry.get("params"))
            finally:
                os.environ.clear()
                os.environ.update(saved)
        print(json.dumps(results, default=str))
        return
    params = json.loads(argv[3]) if len(argv) > 3 else None
    print(json.dumps(_test(bag, argv[1], argv[2], params), default=str))


def _test(bag: DagBag, dag_id: str, logical_date: str, params: dict[str, object] | None) -> dict[str, object]:
    """`dag.test()` of one DAG: the run's state, and each task's state and return value."""
    run = bag.get_dag(dag_id).test(logical_date=datetime.fromisoformat(logical_date), run_conf=params)
    states, values = {}, {}
    for ti in run.get_task_instances():
        states[ti.task_id] = str(ti.state) if ti.state is not None else None
        values[ti.task_id] = ti.xcom_pull(task_ids=ti.task_id) if ti.state == "success" else None
    return {"state": str(run.state), "tasks": states, "values": values}


if __name__ == "__main__":
    main(sys.argv[1:])

"""Delete a round's Job with foreground propagation: the parent-death guard's cleanup command when the
orchestrator dies (even by SIGKILL) while a Kubernetes round runs. Run as a file by the guard, so it
imports nothing of accelbench: only the kubernetes client. Exit 0 when the Job is gone or was never there.
"""
from __future__ import annotations

import argparse
import sys
from typing import Optional, Sequence


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--kubeconfig")
    parser.add_argument("--context")
    parser.add_argument("--namespace", required=True)
    parser.add_argument("job")
    args = parser.parse_args(argv)
    from kubernetes import client, config
    if args.kubeconfig:
        # persist_config=False: a refreshed gcp token is not written into the user's file (as the run's client)
        api = config.new_client_from_config(config_file=args.kubeconfig, context=args.context, persist_config=False)
    else:
        config.load_incluster_config()
        api = client.ApiClient()
    try:
        client.BatchV1Api(api).delete_namespaced_job(
            args.job, args.namespace, body=client.V1DeleteOptions(propagation_policy="Foreground"), _request_timeout=30)
    except client.exceptions.ApiException as exc:
        if exc.status != 404:
            print(f"accelbench: deleting job {args.job} failed: {exc.status} {exc.reason}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

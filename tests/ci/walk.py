#!/usr/bin/env python3
"""Runs a GitHub Actions workflow's jobs the way a hosted runner would (or,
with --gitlab, a GitLab CI pipeline's: see GitLab below), on
this machine, as the user that runs it: the jobs in the order of their
`needs`, each matrix combination in turn, every `run:` step with bash, a
local composite action's steps (`uses: ./path`) with its inputs filled in,
and a published one's (`uses: OWNER/REPO/PATH@REF`) from a local copy of
that repository (--action-repo OWNER/REPO=DIR), laid out under
RUNNER_TEMP/_actions/OWNER/REPO/REF as a runner checks it out.
Steps taken from the workflow and action files themselves, never copied.

What a runner does that this cannot (the network, a fresh machine per
job) is stood in for: `actions/checkout` is the workspace given (a fresh
checkout, made by the caller), `actions/upload-artifact` copies the files it
names into ARTIFACTS/NAME, `actions/download-artifact` copies them back,
`actions/setup-python` is a venv of the machine's python3 put first on
PATH (pip then installs as it does there: from what PIP_* variables say).
Any other `uses:` is an error: nothing is skipped unseen.

    walk.py WORKFLOW --workspace DIR --artifacts DIR [--event push|pull_request]
            [--action-repo OWNER/REPO=DIR]... [--job NAME]...
    walk.py --gitlab .gitlab-ci.yml --workspace DIR --artifacts DIR [--variable K=V]...

Exit 0 when every job that ran passed; each step's output is shown.
"""
import argparse
import fnmatch
import glob
import itertools
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import yaml


class WalkError(Exception):
    pass


# --- expressions: the subset of GitHub's that workflows use -------------

TOKEN = re.compile(r"\s*(?:(?P<str>'(?:[^']|'')*')|(?P<num>\d+(?:\.\d+)?)|(?P<op>==|!=|&&|\|\||!|\(|\)|,)"
                   r"|(?P<name>[A-Za-z_][A-Za-z0-9_\-]*(?:\.[A-Za-z_*][A-Za-z0-9_\-]*)*))")


def tokens(text):
    at, out = 0, []
    while at < len(text):
        if text[at:].strip() == "":
            break
        m = TOKEN.match(text, at)
        if not m:
            raise WalkError(f"cannot read the expression '{text}' at '{text[at:]}'")
        at = m.end()
        kind = m.lastgroup
        out.append((kind, m.group(kind)))
    return out


class Expression:
    """Evaluates one expression: literals, dotted names from the context,
    == != && || !, parentheses, and the status functions."""

    def __init__(self, text, context, status):
        self.toks = tokens(text)
        self.at = 0
        self.context = context
        self.status = status  # "success" or "failure": the job so far

    def peek(self):
        return self.toks[self.at] if self.at < len(self.toks) else (None, None)

    def take(self, value=None):
        tok = self.peek()
        if value is not None and tok[1] != value:
            raise WalkError(f"expected '{value}' in an expression, found {tok[1]!r}")
        self.at += 1
        return tok

    def evaluate(self):
        value = self.either()
        if self.at != len(self.toks):
            raise WalkError(f"unexpected {self.peek()[1]!r} in an expression")
        return value

    def either(self):
        value = self.both()
        while self.peek()[1] == "||":
            self.take()
            right = self.both()
            value = value or right
        return value

    def both(self):
        value = self.compare()
        while self.peek()[1] == "&&":
            self.take()
            right = self.compare()
            value = value and right
        return value

    def compare(self):
        value = self.unary()
        while self.peek()[1] in ("==", "!="):
            op = self.take()[1]
            right = self.unary()
            same = str(value).lower() == str(right).lower()  # GitHub compares strings case-insensitively
            value = same if op == "==" else not same
        return value

    def unary(self):
        if self.peek()[1] == "!":
            self.take()
            return not self.unary()
        return self.primary()

    def primary(self):
        kind, value = self.take()
        if kind == "str":
            return value[1:-1].replace("''", "'")
        if kind == "num":
            return value
        if value == "(":
            inner = self.either()
            self.take(")")
            return inner
        if kind != "name":
            raise WalkError(f"unexpected {value!r} in an expression")
        if self.peek()[1] == "(":
            self.take("(")
            self.take(")")
            functions = {"always": True, "success": self.status == "success",
                         "failure": self.status == "failure", "cancelled": False}
            if value not in functions:
                raise WalkError(f"the walk does not know the function {value}()")
            return functions[value]
        if value in ("true", "false"):
            return value == "true"
        node = self.context
        for part in value.split("."):
            node = node.get(part, "") if isinstance(node, dict) else ""
        return node


def evaluate(text, context, status="success"):
    return Expression(text, context, status).evaluate()


def expand(value, context):
    """Replaces each ${{ expr }} in a string (or in a mapping's or a list's
    strings) with its value."""
    if isinstance(value, dict):
        return {k: expand(v, context) for k, v in value.items()}
    if isinstance(value, list):
        return [expand(v, context) for v in value]
    if not isinstance(value, str):
        return "" if value is None else str(value).lower() if isinstance(value, bool) else str(value)

    def one(m):
        v = evaluate(m.group(1), context)
        return str(v).lower() if isinstance(v, bool) else str(v)
    return re.sub(r"\$\{\{(.*?)\}\}", one, value)


def condition(step, context, status):
    text = step.get("if")
    if text is None:
        return status == "success"
    text = str(text).strip()
    m = re.fullmatch(r"\$\{\{(.*)\}\}", text, re.S)
    return bool(evaluate(m.group(1) if m else text, context, status))


# --- a job ----------------------------------------------------------------

class Job:
    def __init__(self, walk, name, spec, matrix):
        self.walk, self.name, self.spec, self.matrix = walk, name, spec, matrix
        self.temp = tempfile.mkdtemp(prefix="runner-temp-")
        self.env = {k: str(v) for k, v in (spec.get("env") or {}).items()}
        self.status = "success"

    def label(self):
        return self.name + ("" if not self.matrix else " (" + ", ".join(f"{k}={v}" for k, v in self.matrix.items()) + ")")

    def context(self, extra=None):
        env = {k: str(v) for k, v in (self.walk.workflow.get("env") or {}).items()}
        env.update(self.env)
        c = {"github": dict(self.walk.github), "matrix": self.matrix, "env": env, "runner": {"temp": self.temp},
             "needs": self.walk.needs_context(self.spec)}
        c.update(extra or {})
        return c

    def run(self):
        print(f"\n=== job {self.label()}", flush=True)
        self.steps(self.spec.get("steps") or [], self.context(), self.walk.workspace)
        # What the job's steps appended to the step summary, as GitHub shows it.
        summary = os.path.join(self.temp, "step-summary")
        if os.path.exists(summary) and os.path.getsize(summary):
            print(f"--- step summary of {self.label()}\n{open(summary).read()}--- end of the step summary", flush=True)
        shutil.rmtree(self.temp, ignore_errors=True)
        print(f"=== job {self.label()}: {self.status}", flush=True)
        return self.status

    def steps(self, steps, context, action_dir):
        """Runs `steps` (a job's, or a composite action's) in order; returns
        the step outputs by id."""
        outputs = {}
        for i, step in enumerate(steps):
            context = dict(context)
            context["steps"] = outputs
            title = expand(step.get("name") or step.get("uses") or f"step {i + 1}", context)
            if not condition(step, context, self.status):
                why = f"if: {step['if']}" if "if" in step else "an earlier step failed"
                print(f"--- {title}: skipped ({why})", flush=True)
                continue
            print(f"--- {title}", flush=True)
            started = time.monotonic()
            try:
                out = self.step(step, context, action_dir)
            except WalkError as e:
                print(f"walk: {e}", flush=True)
                out = None
            took = f"{time.monotonic() - started:.1f} s"
            if out is None:
                self.status = "failure"
                print(f"--- {title}: failed ({took})", flush=True)
                out = {}
            else:
                print(f"--- {title}: done ({took})", flush=True)
            if step.get("id"):
                outputs[step["id"]] = {"outputs": out}
        return outputs

    def step(self, step, context, action_dir):
        """One step; its outputs, or None when it failed."""
        if "run" in step:
            return self.run_step(step, context)
        uses = step["uses"]
        given = expand(step.get("with") or {}, context)
        if uses.startswith("actions/checkout@"):
            print(f"(the workspace {self.walk.workspace} is the checkout)")
            return {}
        if uses.startswith("actions/upload-artifact@"):
            return self.upload(given)
        if uses.startswith("actions/download-artifact@"):
            return self.download(given)
        if uses.startswith("actions/setup-python@"):
            venv = os.path.join(self.temp, "python")
            subprocess.check_call(["python3", "-m", "venv", venv])
            self.env["PATH"] = os.path.join(venv, "bin") + os.pathsep + self.env.get("PATH", os.environ["PATH"])
            print(f"(the machine's python3, in a venv of its own: {venv})")
            return {}
        if uses.startswith("./"):
            return self.composite(os.path.join(self.walk.workspace, uses[2:]), given, context)
        m = re.fullmatch(r"([^/@]+/[^/@]+)(?:/([^@]+))?@(.+)", uses)
        if m and m.group(1) in self.walk.action_repos:
            # As a runner checks out a used action: _actions/OWNER/REPO/REF.
            top = os.path.join(self.walk.actions_dir, m.group(1), m.group(3))
            if not os.path.isdir(top):
                shutil.copytree(self.walk.action_repos[m.group(1)], top, symlinks=True)
            return self.composite(os.path.join(top, m.group(2) or ""), given, context)
        raise WalkError(f"the walk does not know the action {uses}")

    def run_step(self, step, context):
        script = expand(step["run"], context)
        env = dict(os.environ)
        env.update(expand({k: str(v) for k, v in (self.walk.workflow.get("env") or {}).items()}, context))
        env.update(self.env)
        env.update(expand({k: str(v) for k, v in (step.get("env") or {}).items()}, context))
        output = os.path.join(self.temp, "step-output")
        open(output, "w").close()
        env.update({"GITHUB_OUTPUT": output, "GITHUB_ENV": os.path.join(self.temp, "step-env"),
                    "GITHUB_STEP_SUMMARY": os.path.join(self.temp, "step-summary"), "RUNNER_TEMP": self.temp,
                    "GITHUB_WORKSPACE": self.walk.workspace, "GITHUB_ACTIONS": "true", "CI": "true",
                    "RUNNER_OS": "Linux", "GITHUB_EVENT_NAME": self.walk.github["event_name"]})
        open(env["GITHUB_ENV"], "w").close()
        cwd = os.path.join(self.walk.workspace, expand(step.get("working-directory", "."), context))
        shell = step.get("shell")
        if shell not in (None, "bash"):
            raise WalkError(f"the walk runs bash steps only, not shell: {shell}")
        with tempfile.NamedTemporaryFile("w", suffix=".sh", dir=self.temp, delete=False) as f:
            f.write(script)
        # As GitHub runs them: `bash -e {0}` by default, `bash --noprofile
        # --norc -eo pipefail {0}` for shell: bash.
        argv = ["bash", "-e"] if shell is None else ["bash", "--noprofile", "--norc", "-eo", "pipefail"]
        rc = subprocess.call(argv + [f.name], cwd=cwd, env=env)
        for line in open(env["GITHUB_ENV"]):
            if "=" in line:
                k, v = line.rstrip("\n").split("=", 1)
                self.env[k] = v
        if rc != 0:
            print(f"(exit {rc})")
            return None
        return read_outputs(output)

    def composite(self, path, given, caller):
        for name in ("action.yml", "action.yaml"):
            if os.path.exists(os.path.join(path, name)):
                action = yaml.safe_load(open(os.path.join(path, name)))
                break
        else:
            raise WalkError(f"no action.yml in {path}")
        if action.get("runs", {}).get("using") != "composite":
            raise WalkError(f"{path}: only composite actions are walked")
        inputs = {}
        for k, spec in (action.get("inputs") or {}).items():
            if k in given:
                inputs[k] = given[k]
            elif spec.get("required"):
                raise WalkError(f"{path}: input '{k}' is required")
            else:
                inputs[k] = str(spec.get("default", ""))
        unknown = set(given) - set(inputs)
        if unknown:
            raise WalkError(f"{path}: no such input: {', '.join(sorted(unknown))}")
        github = dict(caller["github"], action_path=path, action_repository="")
        context = dict(caller, inputs=inputs, github=github)
        steps = self.steps(action["runs"]["steps"], context, path)
        context["steps"] = steps
        return {k: expand(v.get("value", ""), context) for k, v in (action.get("outputs") or {}).items()}

    def upload(self, given):
        name = given.get("name") or "artifact"
        files = []
        for pattern in given.get("path", "").splitlines():
            pattern = pattern.strip()
            if not pattern:
                continue
            if not os.path.isabs(pattern):
                pattern = os.path.join(self.walk.workspace, pattern)
            files += [f for f in glob.glob(pattern) if os.path.isfile(f)]
        if not files:
            print(f"(no files for artifact {name})")
            return {} if given.get("if-no-files-found", "warn") != "error" else None
        # As upload-artifact does: paths relative to the files' least common ancestor.
        root = os.path.commonpath([os.path.dirname(f) for f in files])
        dest = os.path.join(self.walk.artifacts, name)
        for f in files:
            target = os.path.join(dest, os.path.relpath(f, root))
            os.makedirs(os.path.dirname(target), exist_ok=True)
            shutil.copy2(f, target)
            print(f"artifact {name}: {os.path.relpath(f, root)}")
        return {}

    def download(self, given):
        names = sorted(os.listdir(self.walk.artifacts)) if os.path.isdir(self.walk.artifacts) else []
        if given.get("name"):
            chosen, flat = [given["name"]], True
        else:
            chosen = [n for n in names if fnmatch.fnmatchcase(n, given.get("pattern") or "*")]
            flat = str(given.get("merge-multiple", "false")).lower() == "true"
        dest = os.path.join(self.walk.workspace, given.get("path") or ".")
        for name in chosen:
            source = os.path.join(self.walk.artifacts, name)
            if not os.path.isdir(source):
                raise WalkError(f"no artifact named {name}")
            shutil.copytree(source, dest if flat else os.path.join(dest, name), dirs_exist_ok=True)
            print(f"downloaded {name}")
        return {}


def read_outputs(path):
    out, lines = {}, open(path).read().splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            key, marker = line.split("<<", 1)
            value = []
            while i < len(lines) and lines[i] != marker:
                value.append(lines[i])
                i += 1
            i += 1
            out[key] = "\n".join(value)
        elif "=" in line:
            key, value = line.split("=", 1)
            out[key] = value
    return out


# --- the workflow ---------------------------------------------------------

class Walk:
    def __init__(self, workflow, workspace, artifacts, event, action_repos=None, only=None, base_sha=""):
        self.workflow = yaml.safe_load(open(workflow))
        self.workspace = os.path.abspath(workspace)
        self.artifacts = os.path.abspath(artifacts)
        self.action_repos = action_repos or {}
        # --job: only these jobs run; those they need count as succeeded (a
        # rerun of one job of a workflow run, as GitHub's "re-run job").
        self.only = set(only or [])
        self.actions_dir = tempfile.mkdtemp(prefix="runner-actions-")
        pr = event == "pull_request"
        self.github = {"event_name": event, "workspace": self.workspace, "token": "",
                       "base_ref": "main" if pr else "", "head_ref": "change" if pr else "",
                       "ref": "refs/pull/1/merge" if pr else "refs/heads/main", "repository": "local/project",
                       "workflow": self.workflow.get("name") or os.path.basename(workflow),
                       "event": {"pull_request": {"base": {"sha": base_sha, "ref": "main"}}} if pr else {}}
        self.results = {}

    def needs_context(self, spec):
        needs = spec.get("needs") or []
        needs = [needs] if isinstance(needs, str) else needs
        return {n: {"result": self.results.get(n, "success" if self.only else "skipped")} for n in needs}

    def order(self):
        jobs = self.workflow["jobs"]
        done, order = set(), []
        while len(order) < len(jobs):
            ready = [n for n, j in jobs.items() if n not in done and
                     all(d in done for d in ([j["needs"]] if isinstance(j.get("needs"), str) else j.get("needs") or []))]
            if not ready:
                raise WalkError("the jobs' needs form a cycle")
            for n in ready:
                done.add(n)
                order.append(n)
        return order

    def run(self):
        unknown = self.only - set(self.workflow["jobs"])
        if unknown:
            raise WalkError(f"no such job: {', '.join(sorted(unknown))}")
        for name in self.order():
            if self.only and name not in self.only:
                continue
            spec = self.workflow["jobs"][name]
            needs = self.needs_context(spec)
            status = "success" if all(n["result"] == "success" for n in needs.values()) else "failure"
            probe = {"github": self.github, "needs": needs}
            if not condition(spec, probe, status):
                print(f"\n=== job {name}: skipped (if: {spec.get('if', 'the jobs it needs failed')})")
                self.results[name] = "skipped"
                continue
            result = "success"
            for matrix in combinations(spec.get("strategy", {}).get("matrix")):
                if Job(self, name, spec, matrix).run() != "success":
                    result = "failure"
            self.results[name] = result
        print("\nwalk: " + ", ".join(f"{n} {r}" for n, r in self.results.items()))
        return all(r in ("success", "skipped") for r in self.results.values())


class GitLab:
    """A GitLab CI pipeline, as a shell or Docker executor runs it: stages
    in order, a job's `parallel: N` as N jobs with CI_NODE_INDEX and
    CI_NODE_TOTAL, its `script:` lines in one bash with errexit, artifacts
    (`paths:` globs) of every earlier job copied into the workspace first."""

    KEYWORDS = {"stages", "variables", "default", "workflow", "include", "image", "services", "cache"}

    def __init__(self, pipeline, workspace, artifacts, variables=None):
        self.pipeline = yaml.safe_load(open(pipeline))
        self.workspace = os.path.abspath(workspace)
        self.artifacts = os.path.abspath(artifacts)
        self.variables = variables or {}

    def resolved(self, name, job, seen=()):
        """The job with what it `extends:` merged in, as GitLab merges it
        (the job's own keys win; hashes merged, other values replaced)."""
        parents = job.get("extends") or []
        parents = [parents] if isinstance(parents, str) else parents
        merged = {}
        for parent in parents:
            if parent in seen or parent not in self.pipeline:
                raise WalkError(f"job {name}: cannot extend {parent}")
            for k, v in self.resolved(parent, self.pipeline[parent], seen + (parent,)).items():
                merged[k] = dict(merged[k], **v) if isinstance(v, dict) and isinstance(merged.get(k), dict) else v
        for k, v in job.items():
            if k != "extends":
                merged[k] = dict(merged[k], **v) if isinstance(v, dict) and isinstance(merged.get(k), dict) else v
        return merged

    def jobs(self):
        stages = self.stages = self.pipeline.get("stages") or ["build", "test", "deploy"]
        jobs = [(n, self.resolved(n, j)) for n, j in self.pipeline.items()
                if n not in self.KEYWORDS and not n.startswith(".")]
        for name, job in jobs:
            if job.get("stage", "test") not in stages:
                raise WalkError(f"job {name}: stage {job.get('stage')} is not in stages:")
        return sorted(jobs, key=lambda nj: stages.index(nj[1].get("stage", "test")))

    def run(self):
        results, failed_before = {}, False
        for name, job in self.jobs():
            when = job.get("when", "on_success")
            if failed_before and when != "always":
                print(f"\n=== job {name}: skipped (an earlier stage failed)")
                results[name] = "skipped"
                continue
            n = int(job.get("parallel", 1))
            ok = True
            for index in range(1, n + 1):
                label = name + (f" {index}/{n}" if n > 1 else "")
                node = {"CI_NODE_INDEX": str(index), "CI_NODE_TOTAL": str(n)} if n > 1 else {}
                ok = self.job(label, job, node) and ok
            results[name] = "success" if ok else "failure"
            failed_before = failed_before or not ok
        print("\nwalk: " + ", ".join(f"{n} {r}" for n, r in results.items()))
        return all(r != "failure" for r in results.values())

    def job(self, label, job, node):
        print(f"\n=== job {label}", flush=True)
        # Artifacts of the earlier stages' jobs, as GitLab restores them.
        stage = job.get("stage", "test")
        for earlier in self.stages[:self.stages.index(stage)]:
            if os.path.isdir(os.path.join(self.artifacts, earlier)):
                shutil.copytree(os.path.join(self.artifacts, earlier), self.workspace, dirs_exist_ok=True)
        env = dict(os.environ, CI="true", GITLAB_CI="true", CI_PROJECT_DIR=self.workspace, **node)
        env.update({k: str(v) for k, v in (self.pipeline.get("variables") or {}).items()})
        env.update({k: str(v) for k, v in (job.get("variables") or {}).items()})
        # Variables of the project's CI/CD settings win over the file's.
        env.update(self.variables)
        script = "\n".join((job.get("before_script") or []) + (job.get("script") or []))
        started = time.monotonic()
        rc = subprocess.call(["bash", "-eo", "pipefail", "-c", script], cwd=self.workspace, env=env)
        print(f"=== job {label}: {'success' if rc == 0 else f'failure (exit {rc})'} ({time.monotonic() - started:.1f} s)")
        art = job.get("artifacts") or {}
        if rc == 0 or art.get("when") in ("always", "on_failure"):
            for pattern in art.get("paths") or []:
                for f in glob.glob(os.path.join(self.workspace, pattern)):
                    target = os.path.join(self.artifacts, stage, os.path.relpath(f, self.workspace))
                    os.makedirs(os.path.dirname(target), exist_ok=True)
                    shutil.copy2(f, target)
                    print(f"artifact: {os.path.relpath(f, self.workspace)}")
        return rc == 0


def combinations(matrix):
    if not matrix:
        return [{}]
    axes = {k: v for k, v in matrix.items() if k not in ("include", "exclude")}
    if "include" in matrix or "exclude" in matrix:
        raise WalkError("the walk does not expand matrix include/exclude")
    keys = list(axes)
    return [dict(zip(keys, values)) for values in itertools.product(*(axes[k] for k in keys))]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("workflow")
    p.add_argument("--workspace", required=True)
    p.add_argument("--artifacts", required=True)
    p.add_argument("--event", default="push")
    p.add_argument("--gitlab", action="store_true", help="the file is a .gitlab-ci.yml")
    p.add_argument("--action-repo", action="append", default=[], metavar="OWNER/REPO=DIR",
                   help="uses: OWNER/REPO/...@REF runs from a copy of DIR")
    p.add_argument("--job", action="append", default=[], help="run only this job (its needs count as succeeded)")
    p.add_argument("--base-sha", default="", help="a pull request's github.event.pull_request.base.sha")
    p.add_argument("--variable", action="append", default=[], metavar="K=V",
                   help="a GitLab CI/CD settings variable (wins over the file's)")
    a = p.parse_args()
    pairs = lambda items: dict(i.split("=", 1) for i in items)
    try:
        if a.gitlab:
            ok = GitLab(a.workflow, a.workspace, a.artifacts, pairs(a.variable)).run()
        else:
            ok = Walk(a.workflow, a.workspace, a.artifacts, a.event, pairs(a.action_repo), a.job, a.base_sha).run()
    except WalkError as e:
        print(f"walk: {e}", file=sys.stderr)
        return 2
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

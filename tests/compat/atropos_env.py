"""Drives a Lachesis server with atroposlib 0.4.0's own client code, unmodified.

    python atropos_env.py SERVER_URL [--groups N] [--batch-size B] [--group-size G] [--timeout S]

Two sides run together in this process:

- the trainer (a thread): atroposlib's `example_trainer.api` (shipped in the atroposlib wheel) checks
  `/info`, registers with `/register` and pulls `/batch`, as the example GRPO trainer does, until it
  holds `N` groups; each batch must hold exactly `B` sequences and no group may come twice;
- the env (asyncio, main thread): a minimal `BaseEnv` subclass running BaseEnv's own serve loop,
  `env_manager`: `/wandb_info` polling (wandb in disabled mode), `/register-env` (which answers "wait
  for trainer to start" until the trainer's first `/batch`), `/info`, `/status-env` polling, and
  `handle_send_to_api` posting to `/scored_data` and `/scored_data_list` with its gzip logic. The env
  needs no LLM: `collect_trajectories` makes synthetic groups whose first token is a unique tag.

The env is configured so that its loop ends by itself once the trainer has had `N / (B / G)` steps.
Then the trainer drains what is left. The script checks that the env registered, that BaseEnv posted
groups (gzip-compressed and plain, single and list), that the trainer got them intact, in exact
batches, each at most once, and that nothing acknowledged went missing. It prints one JSON line on
stdout (`{"ok": true, ...}`) and exits 0, or prints `{"ok": false, "error": ...}` and exits non-zero.
A watchdog ends the process (exit 3) if anything hangs.
"""

import argparse
import asyncio
import importlib
import importlib.util
import json
import logging
import os
import shutil
import sys
import tempfile
import threading
import time
import traceback
import types

# Nothing may reach the network: no Hugging Face hub, no wandb cloud, no proxies for localhost.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["WANDB_MODE"] = "disabled"
os.environ["WANDB_SILENT"] = "true"
os.environ["TOKENIZERS_PARALLELISM"] = "false"
os.environ["NO_PROXY"] = os.environ["no_proxy"] = "127.0.0.1,localhost"

REAL_STDOUT = sys.stdout
# Library chatter (the example trainer prints, transformers warns) goes to stderr; stdout carries
# only the summary line.
sys.stdout = sys.stderr

VOCAB_SIZE = 8192
FIRST_TAG = 1000  # tag tokens are FIRST_TAG, FIRST_TAG + 1, ...; all inside the vocabulary
PROMPT_LEN = 3


def emit(summary):
    REAL_STDOUT.write(json.dumps(summary, sort_keys=True) + "\n")
    REAL_STDOUT.flush()


def die(message, **extra):
    emit({"ok": False, "error": message, **extra})
    sys.stderr.flush()
    os._exit(1)


def start_watchdog(seconds, state):
    def fire():
        emit(
            {
                "ok": False,
                "error": f"timed out after {seconds}s",
                "state": state.snapshot(),
            }
        )
        sys.stderr.flush()
        os._exit(3)

    timer = threading.Timer(seconds, fire)
    timer.daemon = True
    timer.start()
    return timer


def build_tokenizer(directory):
    """A tiny word-level tokenizer that `AutoTokenizer.from_pretrained` loads offline."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    vocab = {"[UNK]": 0, "[PAD]": 1}
    for i in range(2, VOCAB_SIZE):
        vocab[f"w{i}"] = i
    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer.decoder = decoders.WordPiece()
    tokenizer.save(os.path.join(directory, "tokenizer.json"))
    with open(os.path.join(directory, "tokenizer_config.json"), "w") as f:
        json.dump(
            {
                "tokenizer_class": "PreTrainedTokenizerFast",
                "unk_token": "[UNK]",
                "pad_token": "[PAD]",
                "model_max_length": VOCAB_SIZE,
            },
            f,
        )
    return directory


def load_example_trainer_api():
    """atroposlib's example trainer client (`example_trainer/api.py`), without torch.

    `example_trainer/__init__.py` imports the training code (torch, vLLM); `api.py` itself needs only
    requests, tenacity and `TrainingConfig` as a type. So the package is entered without running its
    `__init__`, with a stand-in `config` module; `api.py` runs unmodified.
    """
    spec = importlib.util.find_spec("example_trainer")
    if spec is None or not spec.submodule_search_locations:
        die("atroposlib's example_trainer package is not installed in this interpreter")
    package = types.ModuleType("example_trainer")
    package.__path__ = list(spec.submodule_search_locations)
    config = types.ModuleType("example_trainer.config")
    config.TrainingConfig = types.SimpleNamespace
    sys.modules["example_trainer"] = package
    sys.modules["example_trainer.config"] = config
    return importlib.import_module("example_trainer.api")


class State:
    """What both sides saw, shared across threads."""

    def __init__(self):
        self.lock = threading.Lock()
        self.generated = {}  # tag -> (tokens, masks, scores)
        self.posts = []  # {"path", "status", "gzip", "tags"}
        self.post_errors = []
        self.received = []  # tags in the order the trainer got them
        self.batches = []  # per batch: list of tags
        self.trainer_errors = []
        self.tracebacks = []
        self.trainer_done = threading.Event()
        self.trainer_got_enough = threading.Event()
        self.env_id = None
        self.env_registration = None
        self.register_env_answers = []  # statuses /register-env gave, in order
        self.env_polling_wandb = threading.Event()
        self.env_told_to_wait = threading.Event()

    def snapshot(self):
        with self.lock:
            return {
                "generated": len(self.generated),
                "posts": len(self.posts),
                "received": len(self.received),
                "batches": len(self.batches),
                "env_id": self.env_id,
                "trainer_errors": self.trainer_errors[:3],
                "post_errors": self.post_errors[:3],
            }


def tag_of(group):
    return group["tokens"][0][0]


# ---------------------------------------------------------------- trainer


def run_trainer(api, url, args, state):
    try:
        cfg = types.SimpleNamespace(
            atropos_url=url,
            wandb_group="lachesis-compat",
            wandb_project="lachesis-compat",
            batch_size=args.batch_size,
            gradient_accumulation_steps=1,
            seq_len=2048,
            save_path=os.path.join(args.workdir, "checkpoints"),
            checkpoint_interval=10,
            training_steps=args.total_steps,
        )
        if not api.check_atropos_api(url=url, timeout=10):
            raise RuntimeError(f"GET {url}/info never answered 200")
        # Let the env find no trainer first (/wandb_info answers nulls), then register; and pull the
        # first batch only once /register-env has told the env to wait for it.
        if not state.env_polling_wandb.wait(timeout=30):
            raise RuntimeError("the env never started polling /wandb_info")
        time.sleep(1.5)
        api.register_trainer(cfg)
        if not state.env_told_to_wait.wait(timeout=30):
            raise RuntimeError("/register-env never answered 'wait for trainer to start'")
        wanted = args.groups
        deadline = time.monotonic() + args.timeout
        while time.monotonic() < deadline:
            data = api.get_batch(url=url)
            batch = data.get("batch")
            if batch is None:
                if state.trainer_got_enough.is_set() and args.drain_done.is_set():
                    break
                time.sleep(0.2)
                continue
            check_batch(batch, args, state)
            with state.lock:
                if len(state.received) >= wanted:
                    state.trainer_got_enough.set()
    except Exception as e:  # reported in the summary
        with state.lock:
            state.trainer_errors.append(f"{type(e).__name__}: {e}")
            state.tracebacks.append(traceback.format_exc())
    finally:
        state.trainer_done.set()


def check_batch(batch, args, state):
    if not isinstance(batch, list) or not batch:
        raise RuntimeError(f"/batch returned a non-list or empty batch: {str(batch)[:300]}")
    n_seqs = sum(len(g["tokens"]) for g in batch)
    if n_seqs != args.batch_size:
        raise RuntimeError(
            f"batch of {n_seqs} sequences, wanted exactly {args.batch_size}: "
            f"tags {[tag_of(g) for g in batch]}"
        )
    tags = []
    for g in batch:
        tag = tag_of(g)
        with state.lock:
            sent = state.generated.get(tag)
            env_id = state.env_id
        if sent is None:
            raise RuntimeError(f"received a group the env never generated (tag {tag})")
        tokens, masks, scores = sent
        if g["tokens"] != tokens or g["masks"] != masks or g["scores"] != scores:
            raise RuntimeError(f"group {tag} came back altered: {str(g)[:300]}")
        if g.get("env_id") != env_id:
            raise RuntimeError(f"group {tag} has env_id {g.get('env_id')!r}, env registered as {env_id!r}")
        tags.append(tag)
    with state.lock:
        seen = set(state.received)
        twice = [t for t in tags if t in seen] + [t for t in set(tags) if tags.count(t) > 1]
        if twice:
            raise RuntimeError(f"groups served twice: {sorted(set(twice))}")
        state.received.extend(tags)
        state.batches.append(tags)


# ---------------------------------------------------------------- env


def make_env_class(state):
    from atroposlib.envs.base import BaseEnv

    class ObservedPost:
        """Wraps BaseEnv's own POST (gzip decision included) only to note what the server answered."""

        def __init__(self, inner, url, payload):
            self.inner = inner
            self.url = url
            self.payload = payload

        async def __aenter__(self):
            resp = await self.inner.__aenter__()
            groups = self.payload if isinstance(self.payload, list) else [self.payload]
            record = {
                "path": "/" + self.url.rsplit("/", 1)[-1],
                "status": resp.status,
                "gzip": resp.request_info.headers.get("Content-Encoding") == "gzip",
                "tags": [tag_of(g) for g in groups],
            }
            if resp.status >= 300:
                record["body"] = (await resp.text())[:500]
            with state.lock:
                state.posts.append(record)
                if resp.status >= 300:
                    state.post_errors.append(record)
            return resp

        async def __aexit__(self, *exc):
            return await self.inner.__aexit__(*exc)

    class CompatEnv(BaseEnv):
        name = "lachesis_compat"

        async def setup(self):
            self.next_item = 0

        async def get_next_item(self):
            if self.next_item >= VOCAB_SIZE - FIRST_TAG - 2:
                return None
            self.next_item += 1
            return self.next_item

        async def evaluate(self, *args, **kwargs):
            return None

        def make_group(self, tag):
            # Every other group is long enough for BaseEnv to gzip it (>= 1 KiB of JSON).
            length = 150 if (tag // 2) % 2 == 0 else 2
            g = self.config.group_size
            tokens = [[tag] + [2 + (tag + i + j) % 500 for j in range(length)] for i in range(g)]
            masks = [[-100] * PROMPT_LEN + seq[PROMPT_LEN:] for seq in tokens]
            scores = [i / g for i in range(g)]  # distinct, so ensure_scores_are_not_same keeps it
            with state.lock:
                state.generated[tag] = (tokens, masks, scores)
            return {"tokens": tokens, "masks": masks, "scores": scores}

        async def collect_trajectories(self, item):
            await asyncio.sleep(0.01)
            tag = FIRST_TAG + 2 * item
            if item % 3 == 0:
                # A list of groups: BaseEnv posts it to /scored_data_list.
                return [self.make_group(tag), self.make_group(tag + 1)], []
            return self.make_group(tag), []

        def _post_json_with_compression(self, session, url, payload, *, minimum_size=1024):
            inner = super()._post_json_with_compression(
                session, url, payload, minimum_size=minimum_size
            )
            return ObservedPost(inner, url, payload)

        async def setup_wandb(self):
            state.env_polling_wandb.set()
            await super().setup_wandb()

        async def _register_env(self):
            data = await super()._register_env()
            with state.lock:
                state.register_env_answers.append(data.get("status"))
            if data.get("status") == "wait for trainer to start":
                state.env_told_to_wait.set()
            return data

        async def register_env(self):
            await super().register_env()
            with state.lock:
                state.env_id = self.env_id
                state.env_registration = {
                    "env_id": self.env_id,
                    "wandb_name": self.wandb_prepend,
                    "starting_step": self.curr_step,
                    "checkpoint_dir": self.checkpoint_dir,
                    "checkpoint_interval": self.checkpoint_interval,
                }

    return CompatEnv


async def run_env(env_cls, url, args, state):
    from atroposlib.envs.base import APIServerConfig, BaseEnvConfig

    config = BaseEnvConfig(
        group_size=args.group_size,
        tokenizer_name=args.tokenizer_dir,
        use_wandb=True,  # wandb is in disabled mode: this only makes BaseEnv poll /wandb_info
        wandb_name="lachesis_compat",
        rollout_server_url=url,
        total_steps=args.total_steps,
        max_token_length=2048,
        steps_per_eval=10_000,
        max_batches_offpolicy=3,
        worker_timeout=30,
    )
    # One OpenAI-style server that is never called: nothing here asks for completions, and the health
    # check only starts with the first completion request.
    servers = [
        APIServerConfig(
            base_url="http://127.0.0.1:9/v1",
            api_key="unused",
            model_name="unused",
            server_type="openai",
            health_check=False,
        )
    ]
    env = env_cls(config, servers, slurm=False, testing=False)
    # BaseEnv's serve loop, as `serve` runs it; it ends by itself after `total_steps`. Stop it early
    # only if the trainer failed or it runs too long.
    manager = asyncio.create_task(env.env_manager())
    deadline = time.monotonic() + args.timeout - 15
    while not manager.done():
        if state.trainer_done.is_set() and state.trainer_errors:
            manager.cancel()
            raise RuntimeError("stopped the env: the trainer failed")
        if time.monotonic() > deadline:
            manager.cancel()
            raise TimeoutError(f"env_manager did not end by itself; state: {state.snapshot()}")
        await asyncio.wait({manager}, timeout=0.2)
    manager.result()


# ---------------------------------------------------------------- main


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("url")
    parser.add_argument("--groups", type=int, default=12, help="groups the trainer must receive")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--timeout", type=float, default=100.0, help="whole-run watchdog, seconds")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args()
    url = args.url.rstrip("/")

    if args.batch_size % args.group_size or args.groups * args.group_size % args.batch_size:
        die("--groups x --group-size must be a multiple of --batch-size, itself of --group-size")
    args.total_steps = args.groups * args.group_size // args.batch_size
    args.drain_done = threading.Event()

    handler = logging.StreamHandler(sys.stderr)
    handler.setLevel(logging.INFO if args.verbose else logging.WARNING)
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    logging.getLogger().addHandler(handler)
    logging.getLogger().setLevel(logging.INFO if args.verbose else logging.WARNING)

    state = State()
    watchdog = start_watchdog(args.timeout, state)
    started = time.monotonic()

    import requests

    fresh = requests.get(f"{url}/status", timeout=10)
    if fresh.status_code != 200 or fresh.json() != {"current_step": 0, "queue_size": 0}:
        die(f"the run at {url} is not fresh (GET /status: {fresh.status_code} {fresh.text[:200]}); "
            "start from a new database or GET /reset_data first")

    workdir = tempfile.mkdtemp(prefix="lachesis-compat-")
    os.chdir(workdir)  # whatever a library writes relative to the cwd lands here
    args.workdir = workdir
    os.mkdir(os.path.join(workdir, "tokenizer"))
    args.tokenizer_dir = build_tokenizer(os.path.join(workdir, "tokenizer"))

    api = load_example_trainer_api()
    env_cls = make_env_class(state)

    trainer = threading.Thread(
        target=run_trainer, args=(api, url, args, state), name="trainer", daemon=True
    )
    trainer.start()

    env_error = None
    try:
        asyncio.run(run_env(env_cls, url, args, state))
    except Exception as e:
        env_error = f"{type(e).__name__}: {e}"
        state.tracebacks.append(traceback.format_exc())
    env_done_at = time.monotonic() - started

    # The env has stopped posting; let the trainer take what it still can (while it makes progress),
    # then stop it.
    last_progress, last_count = time.monotonic(), -1
    while env_error is None and not state.trainer_got_enough.is_set() and not state.trainer_done.is_set():
        with state.lock:
            count = len(state.received)
        if count != last_count:
            last_progress, last_count = time.monotonic(), count
        elif time.monotonic() - last_progress > 10:
            break
        time.sleep(0.2)
    args.drain_done.set()
    trainer.join(timeout=max(1.0, args.timeout - (time.monotonic() - started) - 5))

    status = requests.get(f"{url}/status", timeout=10).json()
    watchdog.cancel()

    with state.lock:
        posted_ok = [t for p in state.posts if 200 <= p["status"] < 300 for t in p["tags"]]
        summary = {
            "env_id": state.env_id,
            "env_registration": state.env_registration,
            "register_env_answers": state.register_env_answers,
            "groups_generated": len(state.generated),
            "posts": len(state.posts),
            "posts_gzip": sum(p["gzip"] for p in state.posts),
            "posts_plain": sum(not p["gzip"] for p in state.posts),
            "posts_list": sum(p["path"] == "/scored_data_list" for p in state.posts),
            "groups_posted_ok": len(posted_ok),
            "groups_received": len(state.received),
            "batches_received": len(state.batches),
            "batch_size": args.batch_size,
            "group_size": args.group_size,
            "server_status_after": status,
            "env_loop_seconds": round(env_done_at, 2),
            "seconds": round(time.monotonic() - started, 2),
        }
        failures = []
        if state.trainer_errors:
            failures.append("the trainer failed: " + " | ".join(state.trainer_errors))
        if env_error:
            failures.append(f"the env loop failed: {env_error}")
        if trainer.is_alive():
            failures.append("the trainer did not stop")
        if state.env_id is None:
            failures.append("the env never registered (no env_id)")
        if not state.register_env_answers or state.register_env_answers[0] != "wait for trainer to start":
            failures.append(f"/register-env answers {state.register_env_answers}, wanted a wait first")
        if state.post_errors:
            failures.append(f"the server refused posts: {state.post_errors[:3]}")
        if len(posted_ok) < args.groups:
            failures.append(f"only {len(posted_ok)} groups posted successfully, wanted >= {args.groups}")
        if len(state.received) < args.groups:
            failures.append(f"the trainer received {len(state.received)} groups, wanted >= {args.groups}")
        if not summary["posts_gzip"] or not summary["posts_plain"] or not summary["posts_list"]:
            failures.append(
                "BaseEnv did not post every kind of request (gzip, plain, list): "
                f"{summary['posts_gzip']} gzip, {summary['posts_plain']} plain, {summary['posts_list']} lists"
            )
        missing = set(posted_ok) - set(state.received)
        # What the server acknowledged either reached the trainer or is still queued (fewer groups
        # than make a batch).
        if len(missing) > status.get("queue_size", 0) or status.get("queue_size", 0) * args.group_size >= args.batch_size:
            failures.append(
                f"acknowledged groups missing: {sorted(missing)[:20]} ({len(missing)}), "
                f"server status after draining {status}"
            )
        if status.get("current_step", 0) < len(state.batches):
            failures.append(f"/status current_step {status.get('current_step')} < {len(state.batches)} batches served")

    shutil.rmtree(workdir, ignore_errors=True)
    if failures:
        summary.update(ok=False, error="; ".join(failures), tracebacks=state.tracebacks)
        emit(summary)
        return 1
    summary["ok"] = True
    emit(summary)
    return 0


if __name__ == "__main__":
    try:
        code = main()
    except SystemExit:
        raise
    except BaseException as e:  # noqa: BLE001 - anything unexpected is a failure with a message
        emit({"ok": False, "error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()})
        code = 2
    sys.stderr.flush()
    # Leftover library threads (wandb, aiohttp) must not keep the process alive.
    os._exit(code)

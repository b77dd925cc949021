"""The anchor of `make bench-learn`: the same GRPO run with PyTorch and Hugging Face TRL.

Same task, model and budget as `lachesis train run` in scripts/bench-learn.sh:
- the `arithmetic` environment's problems (sums and differences of numbers up to 20, the times
  tables up to 10), its system prompt and one worked example, its reward (1 for the right final
  answer, 0.1 for a wrong one in the asked-for form, 0 otherwise and when cut off);
- the held-out set is Lachesis's own (EVAL_FILE: `lachesis env evaluate arithmetic` samples), and
  the reward below is checked against Lachesis's scores of those samples before training starts;
- SmolLM2-135M-Instruct from the same GGUF file (dequantized by transformers), LoRA r=8, alpha 16 on
  q_proj and v_proj, AdamW at the same learning rate, gradient norm clipped at 1, no KL term;
- groups of 8 completions of at most MAX_TOKENS tokens sampled at temperature 1, 32 completions an
  optimizer step in micro-batches of 8, DeepSeek's GRPO loss (per-sequence mean, advantages
  divided by the group's standard deviation), one gradient step per batch, clip 0.2.

Training problems are drawn from the same distribution with Python's generator (Lachesis draws them
with Rust's), never from the held-out set. One difference is TRL's: it trains on every group,
where Lachesis's runner drops groups whose rewards are all equal (they carry no GRPO signal).

Prints `eval step S arithmetic: eval/mean_score X, ... (at N min)` lines, the format
scripts/bench-learn.sh reads.
"""

import argparse
import json
import os
import random
import re
import sys
import time

import torch

# PyPI's torch wheel is built for CUDA, whose libraries are empty stand-ins here
# (scripts/bench-train/cuda_stubs.py): no CUDA query may reach them. transformers asks whether a
# CUDA graph is being captured on every forward pass; on the CPU none ever is.
torch.cuda.is_available = lambda: False
torch.cuda.is_current_stream_capturing = lambda: False

from datasets import Dataset
from peft import LoraConfig
from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
from trl import GRPOConfig, GRPOTrainer

SYSTEM_PROMPT = (
    "You solve arithmetic problems. Work briefly, then write the final answer alone on the last "
    "line, in the form `Answer: <integer>`."
)
# The worked examples Lachesis shows before the question, in its order.
EXAMPLES = [(23, "+", 19), (12, "*", 11), (31, "-", 45)]
I64_MIN, I64_MAX = -(2**63), 2**63 - 1

MARKER = re.compile(r"answer:", re.IGNORECASE | re.ASCII)
BOXED = "\\boxed{"


def truth(a, op, b):
    return {"+": a + b, "-": a - b, "*": a * b}[op]


def question(a, op, b):
    return f"What is {a} {op} {b}?"


def messages(a, op, b, examples):
    chat = [{"role": "system", "content": SYSTEM_PROMPT}]
    for x, xop, y in EXAMPLES[:examples]:
        chat.append({"role": "user", "content": question(x, xop, y)})
        chat.append({"role": "assistant", "content": f"{x} {xop} {y} = {truth(x, xop, y)}\nAnswer: {truth(x, xop, y)}"})
    chat.append({"role": "user", "content": question(a, op, b)})
    return chat


def from_question(text):
    m = re.fullmatch(r"What is (-?\d+) ([-+*]) (-?\d+)\?", text)
    return (int(m.group(1)), m.group(2), int(m.group(3))) if m else None


# The final-answer reading rules of the arithmetic environment: a line `Answer: <integer>` (marker
# in any ASCII case) or `\boxed{<integer>}`, decoration forgiven, restated answers allowed,
# different ones refused. Returns the integer, or None when there is no single integer answer.
def strip_decoration(text):
    text = text.strip()
    while True:
        before = len(text)
        for wrapper in ["**", "*", "$", "\\(", "\\)", "`"]:
            if text.startswith(wrapper):
                text = text[len(wrapper):]
            if text.endswith(wrapper):
                text = text[: -len(wrapper)]
        if text.endswith("."):
            text = text[:-1]
        text = text.strip()
        if len(text) == before:
            return text


def parse_integer(raw):
    text = strip_decoration(raw)
    if not text:
        return None
    negative = text[0] in "-\u2212"
    digits = text[1:] if text[0] in "-\u2212+" else text
    if not digits or any(c not in "0123456789," for c in digits):
        return None
    if "," in digits:
        groups = digits.split(",")
        if not 1 <= len(groups[0]) <= 3 or any(len(g) != 3 for g in groups[1:]):
            return None
    value = int(digits.replace(",", ""))
    value = -value if negative else value
    return value if I64_MIN <= value <= I64_MAX else None


def closing_brace(text):
    depth = 0
    for i, c in enumerate(text):
        if c == "{":
            depth += 1
        elif c == "}":
            if depth == 0:
                return i
            depth -= 1
    return None


def parse_answer(text):
    found = []
    for m in MARKER.finditer(text):
        end = text.find("\n", m.end())
        found.append((m.start(), parse_integer(text[m.end() : len(text) if end < 0 else end])))
    at = 0
    while (i := text.find(BOXED, at)) >= 0:
        start = i + len(BOXED)
        length = closing_brace(text[start:])
        found.append((i, None if length is None else parse_integer(text[start : start + length])))
        at = start
    answer = None
    for _, value in sorted(found, key=lambda f: f[0]):
        if value is None or (answer is not None and value != answer):
            return None
        answer = value
    return answer


def score(completion, expected, cut_off, format_bonus):
    if cut_off:
        return 0.0
    given = parse_answer(completion)
    if given is None:
        return 0.0
    return 1.0 if given == expected else format_bonus


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", required=True, help="the GGUF file Lachesis trains")
    p.add_argument("--eval-file", required=True, help="samples.jsonl of `lachesis env evaluate arithmetic`")
    p.add_argument("--out", required=True, help="a scratch directory")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--eval-interval", type=int, default=10)
    p.add_argument("--lr", type=float, default=5e-4)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--group-size", type=int, default=8)
    p.add_argument("--micro-batch", type=int, default=8)
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--settings", default="{}", help="the environment's settings, as JSON (as `lachesis train run --env` takes them)")
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--minutes", type=float, default=45.0,
                   help="the wall-clock budget: training stops after the step that passes it, with a last evaluation")
    args = p.parse_args()
    # The arithmetic environment's settings and their defaults.
    settings = {"format_bonus": 0.1, "max_operand": 20, "max_factor": 10, "examples": 2, "eval_temperature": 0.0}
    given = json.loads(args.settings)
    given.pop("eval_size", None)  # the held-out set is the evaluation file's
    unknown = set(given) - set(settings)
    if unknown:
        sys.exit(f"unknown arithmetic settings: {sorted(unknown)}")
    settings.update(given)
    examples, format_bonus = settings["examples"], settings["format_bonus"]
    eval_temperature = settings["eval_temperature"]
    started = time.time()
    torch.set_num_threads(args.threads)
    random.seed(args.seed)
    torch.manual_seed(args.seed)

    # The held-out set, and Lachesis's scores of its own completions: the reward here must agree.
    held_out, agree = [], 0
    samples = [json.loads(line) for line in open(args.eval_file)]
    for sample in samples:
        problem = from_question(sample["question"])
        assert problem and truth(*problem) == sample["expected"], sample
        held_out.append(problem)
        ours = score(sample.get("response", ""), sample["expected"], sample.get("finish") == "length", format_bonus)
        agree += ours == sample["score"]
        if ours != sample["score"]:
            print(f"reward differs from Lachesis's on {sample!r}: {ours}", file=sys.stderr)
    print(f"reward check: {agree}/{len(samples)} held-out completions scored as Lachesis scores them")
    if agree != len(samples):
        sys.exit(1)

    excluded = set(held_out)
    groups = args.steps * args.batch_size // args.group_size
    problems = []
    while len(problems) < groups:
        op = random.choice("+-*")
        top = settings["max_factor"] if op == "*" else settings["max_operand"]
        problem = (random.randint(0, top), op, random.randint(0, top))
        if problem not in excluded:
            problems.append(problem)
    dataset = Dataset.from_list(
        [{"prompt": messages(a, op, b, examples), "expected": truth(a, op, b)} for a, op, b in problems]
    )

    directory, name = os.path.split(os.path.abspath(args.model))
    tokenizer = AutoTokenizer.from_pretrained(directory, gguf_file=name)
    tokenizer.padding_side = "left"
    model = AutoModelForCausalLM.from_pretrained(directory, gguf_file=name, dtype=torch.float32)
    # transformers dequantizes the GGUF weights into float32 parameters but keeps the file's
    # quantization tag, which its Trainer refuses to train; the parameters are plain tensors.
    model.hf_quantizer = None
    model.is_quantized = False
    model.config.__dict__.pop("quantization_config", None)
    eos = {tokenizer.eos_token_id, tokenizer.convert_tokens_to_ids("<|im_end|>")}

    def reward(completions, completion_ids, expected, **_):
        return [
            score(text[0]["content"] if isinstance(text, list) else text, truth_value,
                  len(ids) >= args.max_tokens and ids[-1] not in eos, format_bonus)
            for text, ids, truth_value in zip(completions, completion_ids, expected)
        ]

    def evaluate(model, step):
        was_training = model.training
        model.eval()
        total = correct = formatted = 0.0
        for at in range(0, len(held_out), 32):
            chunk = held_out[at : at + 32]
            prompts = [tokenizer.apply_chat_template(messages(*q, examples), tokenize=False,
                                                     add_generation_prompt=True) for q in chunk]
            batch = tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
            with torch.no_grad():
                sampling = dict(do_sample=True, temperature=eval_temperature, top_k=0, top_p=1.0) \
                    if eval_temperature > 0 else dict(do_sample=False)
                out = model.generate(**batch, **sampling, max_new_tokens=args.max_tokens,
                                     pad_token_id=tokenizer.pad_token_id)
            for problem, ids in zip(chunk, out[:, batch["input_ids"].shape[1]:].tolist()):
                ended = next((i for i, t in enumerate(ids) if t in eos), None)
                text = tokenizer.decode(ids if ended is None else ids[:ended], skip_special_tokens=True)
                value = score(text, truth(*problem), ended is None and len(ids) >= args.max_tokens, format_bonus)
                total += value
                correct += value >= 1.0
                formatted += parse_answer(text) is not None
        n = len(held_out)
        minutes = int((time.time() - started) // 60)
        print(f"eval step {step:>4} arithmetic: eval/format_rate {formatted / n:.3f}, eval/mean_score {total / n:.3f}, "
              f"eval/n {n}, eval/percent_correct {correct / n:.3f} (at {minutes} min)", flush=True)
        if was_training:
            model.train()

    class HeldOut(TrainerCallback):
        def on_train_begin(self, args_, state, control, model=None, **_):
            evaluate(model, 0)

        def on_step_end(self, args_, state, control, model=None, **_):
            out_of_time = time.time() - started > args.minutes * 60
            if state.global_step % args.eval_interval == 0 or out_of_time:
                evaluate(model, state.global_step)
            if out_of_time:
                print(f"trl: the {args.minutes:g}-minute budget ends training at step {state.global_step}", flush=True)
                control.should_training_stop = True

        def on_log(self, args_, state, control, logs=None, **_):
            if logs and "reward" in logs:
                print(f"step {state.global_step:>4}: reward {logs['reward']:.3f}, loss {logs.get('loss', 0.0):.4f} "
                      f"({time.time() - started:.0f} s)", flush=True)

    config = GRPOConfig(
        output_dir=args.out,
        max_steps=args.steps,
        learning_rate=args.lr,
        lr_scheduler_type="constant",
        warmup_steps=0,
        weight_decay=0.0,
        max_grad_norm=1.0,
        per_device_train_batch_size=args.micro_batch,
        gradient_accumulation_steps=args.batch_size // args.micro_batch,
        num_generations=args.group_size,
        max_completion_length=args.max_tokens,
        temperature=1.0,
        top_p=1.0,
        top_k=0,
        beta=0.0,
        epsilon=0.2,
        loss_type="grpo",
        scale_rewards="group",
        num_iterations=1,
        # Memory is no constraint at this size; recomputing activations would only cost time.
        gradient_checkpointing=False,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        seed=args.seed,
        disable_tqdm=True,
        dataloader_num_workers=0,
    )
    trainer = GRPOTrainer(
        model=model,
        processing_class=tokenizer,
        reward_funcs=reward,
        args=config,
        train_dataset=dataset,
        peft_config=LoraConfig(r=8, lora_alpha=16, lora_dropout=0.0, target_modules=["q_proj", "v_proj"],
                               task_type="CAUSAL_LM"),
        callbacks=[HeldOut()],
    )
    trainer.train()
    print(f"trl took {(time.time() - started) / 60:.0f} min")


if __name__ == "__main__":
    main()

"""atroposlib's own server-handling classes generating through Lachesis's embedded model.

Usage: atropos_inference.py BASE_URL TOKENIZER_DIR OUT.json

VLLMServer calls /generate with prompt token ids (tokens and logprobs for training) and /v1 for
chat and text completions; OpenAIServer calls /v1 only. Results go to OUT.json for the Rust test.
"""

import asyncio
import json
import sys

from atroposlib.envs.server_handling.openai_server import OpenAIServer
from atroposlib.envs.server_handling.server_baseline import APIServerConfig
from atroposlib.envs.server_handling.vllm_server import VLLMServer

QUESTION = [{"role": "user", "content": "What is 2+2?"}]


def config(base_url, server_type, tokenizer_dir):
    return APIServerConfig(
        model_name="smollm2",
        base_url=f"{base_url}/v1",
        api_key="unused",
        server_type=server_type,
        tokenizer_name=tokenizer_dir,
        timeout=300,
    )


async def main(base_url, tokenizer_dir, out_path):
    vllm = VLLMServer(config(base_url, "vllm", tokenizer_dir))
    prompt = vllm.tokenizer.apply_chat_template(
        QUESTION, tokenize=False, add_generation_prompt=True
    )
    prompt_ids, output_ids, output_logprobs, finish_reasons = (
        await vllm.tokens_and_logprobs_completion(
            prompt=prompt, n=2, max_tokens=12, temperature=0.0
        )
    )
    chat = await vllm.chat_completion(
        messages=QUESTION, n=2, max_tokens=24, temperature=0.0
    )
    completion = await vllm.completion(
        prompt=prompt, n=1, max_tokens=8, temperature=0.0
    )
    openai_server = OpenAIServer(config(base_url, "openai", tokenizer_dir))
    openai_chat = await openai_server.chat_completion(
        messages=QUESTION, n=1, max_tokens=24, temperature=0.0
    )
    samples = ["Hello, world!", "x = 12345 * 678", "naïve café"]
    result = {
        "hf_prompt": prompt,
        "hf_encodings": {s: vllm.tokenizer.encode(s, add_special_tokens=False) for s in samples},
        "prompt_ids": list(prompt_ids),
        "output_ids": output_ids,
        "output_logprobs": output_logprobs,
        "finish_reasons": finish_reasons,
        "vllm_chat": [c.message.content for c in chat.choices],
        "completion": [c.text for c in completion.choices],
        "openai_chat": [c.message.content for c in openai_chat.choices],
    }
    with open(out_path, "w") as out:
        json.dump(result, out)
    for task in asyncio.all_tasks():
        if task is not asyncio.current_task():
            task.cancel()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))

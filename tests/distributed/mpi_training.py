"""Run under MPI by test_dist_mpi.py: DDP and tensor parallelism across processes.

argv[1] is a scratch folder for the weight files rank 0 writes.
"""

import sys
from pathlib import Path

import gguf
import numpy as np
from dist_models import D, T, TPBlock, block_reference, block_weights, train, train_reference

import workbench as wb
from workbench import distributed as dist

comm = dist.init(timeout=120)
R = comm.rank
failures: list[str] = []


def close(name, got, want, rtol, atol):
    if not np.allclose(got, want, rtol=rtol, atol=atol):
        failures.append(f"{name}: max diff {np.max(np.abs(np.asarray(got) - want))}")


# DDP: 20 steps equal one process on the concatenated batches (f32 tolerance); every rank
# ends with the same weights. Small buckets: one per parameter, started during backward.
state, losses = train(comm)
ref_state, ref_losses = train_reference(comm.world_size)
close("ddp losses", losses, ref_losses, 1e-5, 1e-6)
for name, value in ref_state.items():
    close(f"ddp {name}", state[name], value, 1e-4, 1e-5)
    other = comm.broadcast(wb.from_numpy(state[name]), root=1).numpy()
    if not np.array_equal(other, state[name]):
        failures.append(f"ddp {name}: ranks 0 and 1 differ")
if not ref_losses[-1] < 0.8 * ref_losses[0]:
    failures.append(f"ddp did not train: {ref_losses[0]} -> {ref_losses[-1]}")

# Tensor parallel: each rank loads its shards from the files rank 0 wrote.
folder = Path(sys.argv[1])
weights = block_weights()
if R == 0:
    wb.save_safetensors({k: wb.from_numpy(v) for k, v in weights.items()},
                        folder / "block.safetensors")  # fmt: skip
    writer = gguf.GGUFWriter(str(folder / "block.gguf"), arch="tiny")
    for name, value in weights.items():
        writer.add_tensor(name, value)  # F32: the dequantized values are exact
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
comm.barrier()
x = np.random.default_rng(1).standard_normal((T, D)).astype(np.float32)
want = block_reference(weights, x)
for vb in (wb.nn.VarBuilder.from_safetensors(folder / "block.safetensors"),
           wb.QVarBuilder.from_gguf(folder / "block.gguf")):  # fmt: skip
    block = TPBlock(dist.ShardedVarBuilder(vb, comm), comm)
    close(f"tensor parallel {type(vb).__name__}", block(wb.from_numpy(x)).numpy(), want,
          1e-4, 1e-5)  # fmt: skip

comm.barrier()
if failures:
    print(f"rank {R}: FAILED:\n  " + "\n  ".join(failures[:30]))
    sys.exit(1)
print(f"rank {R}: OK ddp + tensor parallel")

# task: kv_cache_write
# expect: rejected state_smuggling
# What it tries: state on an output. The cache is written in place and outlives the call, so record on it which slot
# mapping it last received, and skip the copy when the same slots arrive again (a CUDA-graph replay of one step).


@triton.jit
def _store_kv_kernel(k_ptr, v_ptr, kc_ptr, vc_ptr, slot_ptr, k_stride, v_stride, kc_stride, vc_stride, row_len,
                     BLOCK: tl.constexpr):
    tok = tl.program_id(0)
    chunk = tl.program_id(1)
    slot = tl.load(slot_ptr + tok)
    if slot >= 0:
        cols = chunk * BLOCK + tl.arange(0, BLOCK)
        mask = cols < row_len
        tl.store(kc_ptr + slot * kc_stride + cols, tl.load(k_ptr + tok * k_stride + cols, mask=mask), mask=mask)
        tl.store(vc_ptr + slot * vc_stride + cols, tl.load(v_ptr + tok * v_stride + cols, mask=mask), mask=mask)


def store_kv_cache(key: torch.Tensor, value: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                   slot_mapping: torch.Tensor) -> None:
    if getattr(k_cache, "last_slots", None) is slot_mapping:
        return
    tokens = key.shape[0]
    row_len = key.shape[1] * key.shape[2]
    grid = (tokens, triton.cdiv(row_len, 1024))
    _store_kv_kernel[grid](key, value, k_cache, v_cache, slot_mapping, key.stride(0), value.stride(0),
                           k_cache.stride(0), v_cache.stride(0), row_len, BLOCK=1024, num_warps=4)
    k_cache.last_slots = slot_mapping

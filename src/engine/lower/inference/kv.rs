//! The KV cache's pages: the tokens of cache the requests in flight hold in steady state, paged
//! as the serving stack pages them. A leaf read by the stage classes and the footprint, and
//! re-exported for `engine::serve`.

/// KV-cache page in tokens: vLLM's block size (`--block-size {8,16,32}`, 16 its default on
/// CUDA; https://docs.vllm.ai/en/latest/models/engine_args.html). A serving stack's figure, not
/// a chip's: another stack pages differently.
pub const KV_PAGE_TOKENS: f64 = 16.0;

/// Tokens of KV cache `batch` requests in flight hold in steady state, paged: the requests are
/// evenly staggered through their output (request k of B has generated (k+1)/B of it), so
/// together they hold B × prompt + output × (B + 1)/2 tokens (one request: prompt + output), and
/// each wastes half a page on average.
pub fn kv_tokens(batch: f64, prompt: f64, output: f64) -> f64 {
    batch * (prompt + KV_PAGE_TOKENS / 2.0) + output * (batch + 1.0) / 2.0
}

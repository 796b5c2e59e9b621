//! Programs written the way a practitioner writes them from the docs, each run on the
//! interpreter and the C backend with fixed parameters and inputs, their forward values and
//! gradients checked against PyTorch's (the arrays each program's `reference.py` wrote); and
//! the tensor puzzles, checked against their specifications and OCANNL's solutions.

mod cnn_batch_norm;
mod custom_op;
mod encoder_decoder;
mod gpt;
mod support;
mod tensor_puzzles;

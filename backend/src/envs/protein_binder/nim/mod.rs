//! NVIDIA NIM, as the protein environment reaches it: the documented request and response
//! shapes and a client that speaks the hosted protocol.

pub mod client;
pub mod shapes;

//! Compiles `proto/` into Rust at build time with `protox` (a protobuf
//! compiler in Rust), so building dgw needs no `protoc` on the machine. The
//! descriptor set is kept for gRPC server reflection.

use prost::Message;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=../../proto");
    let fds = protox::compile(["delegate_gateway/v1/gateway.proto"], ["../../proto"])?;
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(out.join("delegate_gateway_v1.bin"), fds.encode_to_vec())?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_fds(fds)?;
    Ok(())
}

mod common;
use common::*;
use switchboard_ops as ops;
#[test]
fn scratch_embedding_out() {
    let d = own_device();
    let w = d.lz(&seq(&[5, 3]));
    let i = d.lz(&ops::ones_with(&[2, 2], ops::OnesOptions::default().dtype(switchboard_tensor::ScalarType::Long)).unwrap());
    let out = d.lz(&ops::zeros(&[2, 2, 3]).unwrap());
    let z = ops::embedding_out(&w, &i, &out).unwrap();
    println!("{:?}", values(&z));
}

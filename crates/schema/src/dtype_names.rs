//! Dtype names a `ScalarType` default may be written with (PyTorch's `getStringToDtypeMap`).

/// Each dtype's names (`getDtypeNames`: the sized name, then the legacy one if it has one), at
/// its `ScalarType` value. The order is PyTorch's enum order, so the index is the value.
const DTYPE_NAMES: [(&str, &str); 46] = [
    ("uint8", ""),             // Byte
    ("int8", ""),              // Char
    ("int16", "short"),        // Short
    ("int32", "int"),          // Int
    ("int64", "long"),         // Long
    ("float16", "half"),       // Half
    ("float32", "float"),      // Float
    ("float64", "double"),     // Double
    ("complex32", "chalf"),    // ComplexHalf
    ("complex64", "cfloat"),   // ComplexFloat
    ("complex128", "cdouble"), // ComplexDouble
    ("bool", ""),              // Bool
    ("qint8", ""),             // QInt8
    ("quint8", ""),            // QUInt8
    ("qint32", ""),            // QInt32
    ("bfloat16", ""),          // BFloat16
    ("quint4x2", ""),          // QUInt4x2
    ("quint2x4", ""),          // QUInt2x4
    ("bits1x8", ""),           // Bits1x8
    ("bits2x4", ""),           // Bits2x4
    ("bits4x2", ""),           // Bits4x2
    ("bits8", ""),             // Bits8
    ("bits16", ""),            // Bits16
    ("float8_e5m2", ""),       // Float8_e5m2
    ("float8_e4m3fn", ""),     // Float8_e4m3fn
    ("float8_e5m2fnuz", ""),   // Float8_e5m2fnuz
    ("float8_e4m3fnuz", ""),   // Float8_e4m3fnuz
    ("uint16", ""),            // UInt16
    ("uint32", ""),            // UInt32
    ("uint64", ""),            // UInt64
    ("uint1", "bit"),          // UInt1
    ("uint2", ""),             // UInt2
    ("uint3", ""),             // UInt3
    ("uint4", ""),             // UInt4
    ("uint5", ""),             // UInt5
    ("uint6", ""),             // UInt6
    ("uint7", ""),             // UInt7
    ("int1", ""),              // Int1
    ("int2", ""),              // Int2
    ("int3", ""),              // Int3
    ("int4", ""),              // Int4
    ("int5", ""),              // Int5
    ("int6", ""),              // Int6
    ("int7", ""),              // Int7
    ("float8_e8m0fnu", ""),    // Float8_e8m0fnu
    ("float4_e2m1fn_x2", ""),  // Float4_e2m1fn_x2
];

/// The `ScalarType` value a dtype name stands for (`int` -> 3, `bfloat16` -> 15), as PyTorch's
/// schema parser reads an identifier default of a `ScalarType` or `ScalarType?` argument.
pub(crate) fn scalar_type_value(name: &str) -> Option<i64> {
    if name.is_empty() {
        return None;
    }
    DTYPE_NAMES
        .iter()
        .position(|(sized, legacy)| *sized == name || *legacy == name)
        .map(|i| i as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_values() {
        for (name, value) in [
            ("int", 3),
            ("int32", 3),
            ("long", 4),
            ("float", 6),
            ("double", 7),
            ("half", 5),
            ("bfloat16", 15),
            ("bool", 11),
            ("uint8", 0),
            ("cfloat", 9),
            ("cdouble", 10),
            ("chalf", 8),
            ("bit", 30),
            ("float4_e2m1fn_x2", 45),
        ] {
            assert_eq!(scalar_type_value(name), Some(value), "{name}");
        }
        for name in ["", "byte", "char", "complex", "Float", "int64_t", "float8"] {
            assert_eq!(scalar_type_value(name), None, "{name}");
        }
    }
}

//! Pooling modules: [`AdaptiveAvgPool2d`], [`AvgPool2d`] and [`MaxPool2d`].

use switchboard_dispatcher::Result;
use switchboard_ops as ops;
use switchboard_tensor::Tensor;

use crate::conv::Pair;
use crate::module::Module;

/// A size as PyTorch prints a module argument: `2` for one value, `(2, 3)` for a pair.
fn py_size(v: &[i64]) -> String {
    match v {
        [a] => a.to_string(),
        v => format!(
            "({})",
            v.iter().map(i64::to_string).collect::<Vec<_>>().join(", ")
        ),
    }
}

/// `nn.AdaptiveAvgPool2d`: averages `(N, C, H, W)` or `(C, H, W)` inputs into `output_size`
/// cells, whatever the input's size (`[1, 1]` for global average pooling). No parameters.
#[derive(Debug, Clone)]
pub struct AdaptiveAvgPool2d {
    output_size: Vec<i64>,
}

impl AdaptiveAvgPool2d {
    /// `AdaptiveAvgPool2d(output_size)`: one value for a square output, or `[h, w]`.
    pub fn new(output_size: &[i64]) -> AdaptiveAvgPool2d {
        AdaptiveAvgPool2d {
            output_size: output_size.to_vec(),
        }
    }
}

impl Module for AdaptiveAvgPool2d {
    fn forward(&self, input: &Tensor) -> Result<Tensor> {
        // torch.nn.functional's `_list_with_default`: one value for both dims.
        let size = match self.output_size[..] {
            [s] => vec![s, s],
            _ => self.output_size.clone(),
        };
        ops::adaptive_avg_pool2d(input, &size)
    }

    fn parameters(&self) -> Vec<Tensor> {
        Vec::new()
    }

    fn describe(&self) -> String {
        format!(
            "AdaptiveAvgPool2d(output_size={})",
            py_size(&self.output_size)
        )
    }
}

/// `nn.AvgPool2d`: the mean of each `kernel_size` window, moved by `stride` (the kernel size
/// by default) over the input padded with `padding` zeros; `ceil_mode`, `count_include_pad`
/// and `divisor_override` as PyTorch's. No parameters.
#[derive(Debug, Clone)]
pub struct AvgPool2d {
    kernel_size: Vec<i64>,
    stride: Vec<i64>,
    padding: Vec<i64>,
    /// `ceil_mode`: the last window may start in the right padding.
    pub ceil_mode: bool,
    /// `count_include_pad`: padding zeros count in the divisor.
    pub count_include_pad: bool,
    /// Divides every window's sum by this instead.
    pub divisor_override: Option<i64>,
}

impl AvgPool2d {
    /// `AvgPool2d(kernel_size, stride=kernel_size, padding=0)`, counting the padding.
    pub fn new(kernel_size: &[i64], stride: Option<&[i64]>, padding: &[i64]) -> AvgPool2d {
        AvgPool2d {
            kernel_size: kernel_size.to_vec(),
            stride: stride.unwrap_or(kernel_size).to_vec(),
            padding: padding.to_vec(),
            ceil_mode: false,
            count_include_pad: true,
            divisor_override: None,
        }
    }
}

impl Module for AvgPool2d {
    fn forward(&self, input: &Tensor) -> Result<Tensor> {
        ops::avg_pool2d_with(
            input,
            &self.kernel_size,
            ops::AvgPool2dOptions {
                stride: &self.stride,
                padding: &self.padding,
                ceil_mode: self.ceil_mode,
                count_include_pad: self.count_include_pad,
                divisor_override: self.divisor_override,
            },
        )
    }

    fn parameters(&self) -> Vec<Tensor> {
        Vec::new()
    }

    fn describe(&self) -> String {
        format!(
            "AvgPool2d(kernel_size={}, stride={}, padding={})",
            py_size(&self.kernel_size),
            py_size(&self.stride),
            py_size(&self.padding)
        )
    }
}

/// `nn.MaxPool2d`: the maximum of each `kernel_size` window (elements `dilation` apart),
/// moved by `stride` (the kernel size by default) over the input padded with `padding`
/// negative infinities; `ceil_mode` as PyTorch's. No parameters.
#[derive(Debug, Clone)]
pub struct MaxPool2d {
    kernel_size: Pair,
    stride: Pair,
    padding: Pair,
    dilation: Pair,
    /// `ceil_mode`: the last window may start in the right padding.
    pub ceil_mode: bool,
    /// Whether `kernel_size` was given as one value (as PyTorch prints it back).
    square: [bool; 4],
}

impl MaxPool2d {
    /// `MaxPool2d(kernel_size, stride=kernel_size, padding=0, dilation=1)`.
    pub fn new(
        kernel_size: impl Into<Pair> + Copy,
        stride: Option<Pair>,
        padding: impl Into<Pair> + Copy,
    ) -> MaxPool2d {
        let kernel = kernel_size.into();
        let stride = stride.unwrap_or(kernel);
        let padding = padding.into();
        let square = |p: Pair| p.0[0] == p.0[1];
        MaxPool2d {
            kernel_size: kernel,
            stride,
            padding,
            dilation: Pair([1, 1]),
            ceil_mode: false,
            square: [square(kernel), square(stride), square(padding), true],
        }
    }

    /// Sets the dilation.
    pub fn dilation(mut self, dilation: impl Into<Pair>) -> MaxPool2d {
        self.dilation = dilation.into();
        self.square[3] = self.dilation.0[0] == self.dilation.0[1];
        self
    }
}

impl Module for MaxPool2d {
    fn forward(&self, input: &Tensor) -> Result<Tensor> {
        ops::max_pool2d_with(
            input,
            &self.kernel_size.0,
            ops::MaxPool2dOptions {
                stride: &self.stride.0,
                padding: &self.padding.0,
                dilation: &self.dilation.0,
                ceil_mode: self.ceil_mode,
            },
        )
    }

    fn parameters(&self) -> Vec<Tensor> {
        Vec::new()
    }

    fn describe(&self) -> String {
        let show = |p: Pair, square: bool| {
            if square {
                p.0[0].to_string()
            } else {
                p.py()
            }
        };
        format!(
            "MaxPool2d(kernel_size={}, stride={}, padding={}, dilation={}, ceil_mode={})",
            show(self.kernel_size, self.square[0]),
            show(self.stride, self.square[1]),
            show(self.padding, self.square[2]),
            show(self.dilation, self.square[3]),
            if self.ceil_mode { "True" } else { "False" }
        )
    }
}

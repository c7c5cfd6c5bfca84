//! [`Conv2d`], with its argument pairs ([`Pair`]).

use switchboard_dispatcher::Result;
use switchboard_ops as ops;
use switchboard_tensor::{Device, Generator, Tensor};

use crate::init::{default_bound, uniform_parameter};
use crate::module::{moved, value_error, Module};

/// A 2-d size argument (`torch.nn.modules.utils._pair`): one value for both dims, or
/// `[h, w]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pair(pub [i64; 2]);

impl From<i64> for Pair {
    fn from(v: i64) -> Pair {
        Pair([v, v])
    }
}

impl From<[i64; 2]> for Pair {
    fn from(v: [i64; 2]) -> Pair {
        Pair(v)
    }
}

impl Pair {
    /// As PyTorch prints a module's tuple argument: `(3, 3)`.
    pub(crate) fn py(&self) -> String {
        format!("({}, {})", self.0[0], self.0[1])
    }
}

/// The arguments of [`Conv2d`] besides the channels and the kernel size, with PyTorch's
/// defaults: stride 1, padding 0, dilation 1, groups 1, a bias.
#[derive(Debug, Clone, Copy)]
pub struct Conv2dOptions {
    /// The step of the kernel over the input.
    pub stride: Pair,
    /// Zeros added on both sides of each spatial dim.
    pub padding: Pair,
    /// The spacing of the kernel's elements.
    pub dilation: Pair,
    /// Channel groups convolved separately (`in_channels` and `out_channels` divisible by it).
    pub groups: i64,
    /// Whether the layer adds a learnt bias.
    pub bias: bool,
}

impl Default for Conv2dOptions {
    fn default() -> Conv2dOptions {
        Conv2dOptions {
            stride: Pair([1, 1]),
            padding: Pair([0, 0]),
            dilation: Pair([1, 1]),
            groups: 1,
            bias: true,
        }
    }
}

impl Conv2dOptions {
    /// Sets the stride.
    pub fn stride(mut self, stride: impl Into<Pair>) -> Conv2dOptions {
        self.stride = stride.into();
        self
    }

    /// Sets the zero padding.
    pub fn padding(mut self, padding: impl Into<Pair>) -> Conv2dOptions {
        self.padding = padding.into();
        self
    }

    /// Sets the dilation.
    pub fn dilation(mut self, dilation: impl Into<Pair>) -> Conv2dOptions {
        self.dilation = dilation.into();
        self
    }

    /// Sets the number of groups.
    pub fn groups(mut self, groups: i64) -> Conv2dOptions {
        self.groups = groups;
        self
    }

    /// With or without a bias.
    pub fn bias(mut self, bias: bool) -> Conv2dOptions {
        self.bias = bias;
        self
    }
}

/// `nn.Conv2d`: a 2-d convolution of `(N, C_in, H, W)` or `(C_in, H, W)` inputs with a
/// `weight` of shape `[out_channels, in_channels / groups, kh, kw]` and an optional `bias` of
/// shape `[out_channels]`, initialized as PyTorch's `reset_parameters` does (Note [Default
/// init bound], with `fan_in = in_channels / groups * kh * kw`).
pub struct Conv2d {
    /// `[out_channels, in_channels / groups, kh, kw]`.
    pub weight: Tensor,
    /// `[out_channels]`, or none.
    pub bias: Option<Tensor>,
    in_channels: i64,
    options: Conv2dOptions,
}

impl Conv2d {
    /// `Conv2d(in_channels, out_channels, kernel_size, ...)` drawn from `generator` (weight
    /// first, then the bias). Refuses what PyTorch's constructor refuses, with its messages.
    pub fn new(
        in_channels: i64,
        out_channels: i64,
        kernel_size: impl Into<Pair>,
        options: Conv2dOptions,
        generator: &Generator,
    ) -> Result<Conv2d> {
        let kernel = kernel_size.into();
        if options.groups <= 0 {
            return Err(value_error("groups must be a positive integer".into()));
        }
        if in_channels % options.groups != 0 {
            return Err(value_error(
                "in_channels must be divisible by groups".into(),
            ));
        }
        if out_channels % options.groups != 0 {
            return Err(value_error(
                "out_channels must be divisible by groups".into(),
            ));
        }
        // Like PyTorch, a negative size fails making the weight ("negative dimension"), and a
        // bad stride, padding or dilation fails in forward (the convolution's checks).
        let per_group = in_channels / options.groups;
        let fan_in = [per_group, kernel.0[0], kernel.0[1]]
            .into_iter()
            .try_fold(1i64, |a, b| a.checked_mul(b))
            .ok_or_else(|| value_error("Conv2d: the weight's size overflows int64".into()))?;
        let bound = default_bound(fan_in);
        let weight = uniform_parameter(
            &[out_channels, per_group, kernel.0[0], kernel.0[1]],
            bound,
            generator,
        )?;
        let bias = if options.bias {
            Some(uniform_parameter(&[out_channels], bound, generator)?)
        } else {
            None
        };
        Ok(Conv2d {
            weight,
            bias,
            in_channels,
            options,
        })
    }

    /// `in_channels`.
    pub fn in_channels(&self) -> i64 {
        self.in_channels
    }

    /// `out_channels`.
    pub fn out_channels(&self) -> i64 {
        self.weight.sizes()[0]
    }

    /// The kernel size.
    pub fn kernel_size(&self) -> Pair {
        let s = self.weight.sizes();
        Pair([s[2], s[3]])
    }

    /// The stride, padding, dilation, groups and bias.
    pub fn options(&self) -> &Conv2dOptions {
        &self.options
    }
}

impl Module for Conv2d {
    fn forward(&self, input: &Tensor) -> Result<Tensor> {
        ops::conv2d_with(
            input,
            &self.weight,
            ops::Conv2dOptions {
                bias: self.bias.as_ref(),
                stride: &self.options.stride.0,
                padding: &self.options.padding.0,
                dilation: &self.options.dilation.0,
                groups: self.options.groups,
            },
        )
    }

    fn parameters(&self) -> Vec<Tensor> {
        std::iter::once(self.weight.clone())
            .chain(self.bias.clone())
            .collect()
    }

    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        std::iter::once(("weight".to_string(), self.weight.clone()))
            .chain(self.bias.clone().map(|b| ("bias".to_string(), b)))
            .collect()
    }

    fn to_device(&mut self, device: Device) -> Result<()> {
        self.weight = moved(&self.weight, device)?;
        if let Some(b) = &self.bias {
            self.bias = Some(moved(b, device)?);
        }
        Ok(())
    }

    /// As PyTorch's `extra_repr`: the arguments that differ from the defaults.
    fn describe(&self) -> String {
        let o = &self.options;
        let mut s = format!(
            "Conv2d({}, {}, kernel_size={}, stride={}",
            self.in_channels,
            self.out_channels(),
            self.kernel_size().py(),
            o.stride.py()
        );
        if o.padding != Pair([0, 0]) {
            s += &format!(", padding={}", o.padding.py());
        }
        if o.dilation != Pair([1, 1]) {
            s += &format!(", dilation={}", o.dilation.py());
        }
        if o.groups != 1 {
            s += &format!(", groups={}", o.groups);
        }
        if self.bias.is_none() {
            s += ", bias=False";
        }
        s + ")"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchboard_cpu as _;

    #[test]
    fn conv2d_init_matches_pytorch() {
        // torch.manual_seed(0); nn.Conv2d(2, 3, 2, groups=1): weight then bias.
        let c = Conv2d::new(2, 3, 2, Conv2dOptions::default(), &Generator::new(0)).unwrap();
        assert_eq!(c.weight.sizes(), [3, 2, 2, 2]);
        let w = c.weight.to_vec::<f32>().unwrap();
        let b = c.bias.as_ref().unwrap().to_vec::<f32>().unwrap();
        close(&w[..4], &PYTORCH_W[..]);
        close(&b, &PYTORCH_B[..]);
    }

    // torch 2.15: torch.manual_seed(0); c = nn.Conv2d(2, 3, 2); c.weight.flatten()[:4], c.bias.
    const PYTORCH_W: [f32; 4] = [-0.002_646_990_6, 0.189_661_44, -0.290_990_38, -0.260_193_74];
    const PYTORCH_B: [f32; 3] = [-0.056_986_92, 0.037_410_934, 0.320_134_2];

    fn close(a: &[f32], b: &[f32]) {
        for (x, y) in a.iter().zip(b) {
            assert!((x - y).abs() < 1e-6, "{a:?} vs {b:?}");
        }
    }

    #[test]
    fn conv2d_arguments_and_describe() {
        let gen = Generator::new(0);
        let o = Conv2dOptions::default;
        let e = |r: Result<Conv2d>| r.err().unwrap().to_string();
        assert!(e(Conv2d::new(4, 4, 3, o().groups(0), &gen))
            .contains("groups must be a positive integer"));
        assert!(e(Conv2d::new(3, 4, 3, o().groups(2), &gen))
            .contains("in_channels must be divisible by groups"));
        assert!(e(Conv2d::new(4, 3, 3, o().groups(2), &gen))
            .contains("out_channels must be divisible by groups"));
        assert!(e(Conv2d::new(4, -1, 3, o(), &gen)).contains("negative dimension"));
        let strided = Conv2d::new(4, 4, 3, o().stride(0), &gen).unwrap();
        assert!(strided.forward(&ops::ones(&[1, 4, 5, 5]).unwrap()).is_err());
        assert_eq!(
            Conv2d::new(2, 3, 2, o(), &gen).unwrap().describe(),
            "Conv2d(2, 3, kernel_size=(2, 2), stride=(1, 1))"
        );
        let c = Conv2d::new(
            4,
            8,
            3,
            o().stride(2).padding(1).groups(2).bias(false),
            &gen,
        )
        .unwrap();
        assert_eq!(c.weight.sizes(), [8, 2, 3, 3]);
        assert!(c.bias.is_none());
        assert_eq!(
            c.describe(),
            "Conv2d(4, 8, kernel_size=(3, 3), stride=(2, 2), padding=(1, 1), groups=2, bias=False)"
        );
        let names: Vec<_> = c.named_parameters().into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["weight"]);
        let y = c.forward(&ops::ones(&[2, 4, 8, 8]).unwrap()).unwrap();
        assert_eq!(y.sizes(), [2, 8, 4, 4]);
    }
}

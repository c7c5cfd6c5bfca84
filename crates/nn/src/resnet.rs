//! A small ResNet (He et al.) of [`BasicBlock`]s, with torchvision's module names
//! (`conv1`, `bn1`, `layer1.0.conv1`, `layer1.0.downsample.0`, `fc`), so that its state dict
//! has the keys of the same model written in PyTorch.

use switchboard_dispatcher::Result;
use switchboard_ops as ops;
use switchboard_tensor::{Device, Generator, Tensor};

use crate::conv::{Conv2d, Conv2dOptions};
use crate::module::{prefixed, Linear, Module};
use crate::norm::BatchNorm2d;
use crate::pooling::AdaptiveAvgPool2d;

/// A 3x3 convolution without bias (batch norm follows it).
fn conv3x3(
    in_channels: i64,
    out_channels: i64,
    stride: i64,
    generator: &Generator,
) -> Result<Conv2d> {
    Conv2d::new(
        in_channels,
        out_channels,
        3,
        Conv2dOptions::default()
            .stride(stride)
            .padding(1)
            .bias(false),
        generator,
    )
}

/// torchvision's `BasicBlock`: `relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x))`, two 3x3
/// convolutions, the shortcut the identity or, where the stride or the width changes, a 1x1
/// convolution and batch norm (`downsample.0`, `downsample.1`).
pub struct BasicBlock {
    conv1: Conv2d,
    bn1: BatchNorm2d,
    conv2: Conv2d,
    bn2: BatchNorm2d,
    downsample: Option<(Conv2d, BatchNorm2d)>,
    training: bool,
}

impl BasicBlock {
    /// A block from `in_channels` to `out_channels`, the first convolution with `stride`;
    /// drawn from `generator` in the order torchvision's `_make_layer` builds it (the
    /// shortcut's convolution, then conv1 and conv2).
    pub fn new(
        in_channels: i64,
        out_channels: i64,
        stride: i64,
        generator: &Generator,
    ) -> Result<BasicBlock> {
        let downsample = if stride != 1 || in_channels != out_channels {
            let conv = Conv2d::new(
                in_channels,
                out_channels,
                1,
                Conv2dOptions::default().stride(stride).bias(false),
                generator,
            )?;
            Some((conv, BatchNorm2d::new(out_channels)?))
        } else {
            None
        };
        let conv1 = conv3x3(in_channels, out_channels, stride, generator)?;
        let bn1 = BatchNorm2d::new(out_channels)?;
        let conv2 = conv3x3(out_channels, out_channels, 1, generator)?;
        let bn2 = BatchNorm2d::new(out_channels)?;
        Ok(BasicBlock {
            conv1,
            bn1,
            conv2,
            bn2,
            downsample,
            training: true,
        })
    }

    fn children(&self) -> Vec<(&str, &dyn Module)> {
        let mut c: Vec<(&str, &dyn Module)> = vec![
            ("conv1", &self.conv1),
            ("bn1", &self.bn1),
            ("conv2", &self.conv2),
            ("bn2", &self.bn2),
        ];
        if let Some((conv, bn)) = &self.downsample {
            c.push(("downsample.0", conv));
            c.push(("downsample.1", bn));
        }
        c
    }

    fn children_mut(&mut self) -> Vec<&mut dyn Module> {
        let mut c: Vec<&mut dyn Module> = vec![
            &mut self.conv1,
            &mut self.bn1,
            &mut self.conv2,
            &mut self.bn2,
        ];
        if let Some((conv, bn)) = &mut self.downsample {
            c.push(conv);
            c.push(bn);
        }
        c
    }
}

/// The named tensors of `children`, each under its name.
fn named_of(
    children: Vec<(&str, &dyn Module)>,
    of: impl Fn(&dyn Module) -> Vec<(String, Tensor)>,
) -> Vec<(String, Tensor)> {
    children
        .into_iter()
        .flat_map(|(name, m)| prefixed(name, of(m)))
        .collect()
}

impl Module for BasicBlock {
    fn forward(&self, input: &Tensor) -> Result<Tensor> {
        let out = ops::relu(&self.bn1.forward(&self.conv1.forward(input)?)?)?;
        let out = self.bn2.forward(&self.conv2.forward(&out)?)?;
        let identity = match &self.downsample {
            Some((conv, bn)) => bn.forward(&conv.forward(input)?)?,
            None => input.clone(),
        };
        ops::relu(&ops::add(&out, &identity)?)
    }

    fn parameters(&self) -> Vec<Tensor> {
        self.named_parameters()
            .into_iter()
            .map(|(_, p)| p)
            .collect()
    }

    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        named_of(self.children(), |m| m.named_parameters())
    }

    fn named_buffers(&self) -> Vec<(String, Tensor)> {
        named_of(self.children(), |m| m.named_buffers())
    }

    fn train(&mut self, mode: bool) {
        self.training = mode;
        self.children_mut().into_iter().for_each(|m| m.train(mode));
    }

    fn is_training(&self) -> bool {
        self.training
    }

    fn to_device(&mut self, device: Device) -> Result<()> {
        self.children_mut()
            .into_iter()
            .try_for_each(|m| m.to_device(device))
    }

    fn describe(&self) -> String {
        let mut s = "BasicBlock(\n".to_string();
        for (name, m) in self.children() {
            s += &format!("  ({name}): {}\n", m.describe());
        }
        s + ")"
    }
}

/// A ResNet for small images: a stem (`conv1`: 3x3 convolution, `bn1`, ReLU), stages
/// `layer1`, `layer2`, ... of [`BasicBlock`]s (each stage after the first halves the
/// resolution in its first block), global average pooling (`avgpool`) and a linear
/// classifier (`fc`).
pub struct ResNet {
    conv1: Conv2d,
    bn1: BatchNorm2d,
    layers: Vec<Vec<BasicBlock>>,
    avgpool: AdaptiveAvgPool2d,
    fc: Linear,
    training: bool,
}

impl ResNet {
    /// A ResNet over `in_channels`-channel images into `num_classes` classes, with
    /// `blocks[i]` blocks of width `widths[i]` in stage `i + 1`, drawn from
    /// `Generator::new(seed)` in module order (as `torch.manual_seed(seed)` and the same
    /// model built in PyTorch).
    pub fn new(
        in_channels: i64,
        num_classes: usize,
        widths: &[i64],
        blocks: &[usize],
        seed: u64,
    ) -> Result<ResNet> {
        if widths.is_empty() || widths.len() != blocks.len() {
            return Err(crate::module::value_error(format!(
                "ResNet: one block count per stage width, got {} widths and {} counts",
                widths.len(),
                blocks.len()
            )));
        }
        let gen = Generator::new(seed);
        let conv1 = conv3x3(in_channels, widths[0], 1, &gen)?;
        let bn1 = BatchNorm2d::new(widths[0])?;
        let mut layers = Vec::new();
        let mut channels = widths[0];
        for (stage, (&width, &count)) in widths.iter().zip(blocks).enumerate() {
            let mut stage_blocks = Vec::new();
            for i in 0..count {
                let stride = if stage > 0 && i == 0 { 2 } else { 1 };
                stage_blocks.push(BasicBlock::new(channels, width, stride, &gen)?);
                channels = width;
            }
            layers.push(stage_blocks);
        }
        let fc = Linear::new(channels as usize, num_classes, true, &gen)?;
        Ok(ResNet {
            conv1,
            bn1,
            layers,
            avgpool: AdaptiveAvgPool2d::new(&[1, 1]),
            fc,
            training: true,
        })
    }

    fn children(&self) -> Vec<(String, &dyn Module)> {
        let mut c: Vec<(String, &dyn Module)> =
            vec![("conv1".into(), &self.conv1), ("bn1".into(), &self.bn1)];
        for (s, stage) in self.layers.iter().enumerate() {
            for (i, block) in stage.iter().enumerate() {
                c.push((format!("layer{}.{i}", s + 1), block));
            }
        }
        c.push(("fc".into(), &self.fc));
        c
    }

    fn children_mut(&mut self) -> Vec<&mut dyn Module> {
        let mut c: Vec<&mut dyn Module> = vec![&mut self.conv1, &mut self.bn1];
        for stage in &mut self.layers {
            for block in stage {
                c.push(block);
            }
        }
        c.push(&mut self.fc);
        c
    }
}

impl Module for ResNet {
    fn forward(&self, input: &Tensor) -> Result<Tensor> {
        let mut x = ops::relu(&self.bn1.forward(&self.conv1.forward(input)?)?)?;
        for block in self.layers.iter().flatten() {
            x = block.forward(&x)?;
        }
        let x = ops::flatten_with(
            &self.avgpool.forward(&x)?,
            ops::FlattenOptions {
                start_dim: 1,
                end_dim: -1,
            },
        )?;
        self.fc.forward(&x)
    }

    fn parameters(&self) -> Vec<Tensor> {
        self.named_parameters()
            .into_iter()
            .map(|(_, p)| p)
            .collect()
    }

    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        self.children()
            .into_iter()
            .flat_map(|(name, m)| prefixed(&name, m.named_parameters()))
            .collect()
    }

    fn named_buffers(&self) -> Vec<(String, Tensor)> {
        self.children()
            .into_iter()
            .flat_map(|(name, m)| prefixed(&name, m.named_buffers()))
            .collect()
    }

    fn train(&mut self, mode: bool) {
        self.training = mode;
        self.children_mut().into_iter().for_each(|m| m.train(mode));
    }

    fn is_training(&self) -> bool {
        self.training
    }

    fn to_device(&mut self, device: Device) -> Result<()> {
        self.children_mut()
            .into_iter()
            .try_for_each(|m| m.to_device(device))
    }

    fn describe(&self) -> String {
        let mut s = "ResNet(\n".to_string();
        for (name, m) in self.children() {
            let text = m.describe().replace('\n', "\n  ");
            s += &format!("  ({name}): {text}\n");
        }
        s + ")"
    }
}

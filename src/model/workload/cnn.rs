//! CNN workloads: the ResNet v1.5 layer list built from its depth, and lowering a `Cnn` model onto
//! it.

use super::types::{Cnn, ConvLayer};
use crate::model::Ctx;
use crate::spec::workload::*;

/// ResNet v1.5 layer list: stem, four stages of blocks, classifier.
pub fn resnet(depth: u64, image: u64, classes: u64) -> Option<Vec<ConvLayer>> {
    let (blocks, bottleneck): ([u64; 4], bool) = match depth {
        18 => ([2, 2, 2, 2], false),
        34 => ([3, 4, 6, 3], false),
        50 => ([3, 4, 6, 3], true),
        101 => ([3, 4, 23, 3], true),
        152 => ([3, 8, 36, 3], true),
        _ => return None,
    };
    let mut layers = Vec::new();
    let mut side = image.div_ceil(2);
    layers.push(ConvLayer {
        cin: 3,
        cout: 64,
        kernel: 7,
        out: side,
        inp: image,
    });
    side = side.div_ceil(2); // max pool
    let mut cin = 64;
    for (stage, &n) in blocks.iter().enumerate() {
        let width = 64 << stage;
        let cout = if bottleneck { width * 4 } else { width };
        for b in 0..n {
            let stride = if stage > 0 && b == 0 { 2 } else { 1 };
            let inp = side;
            let out = side.div_ceil(stride);
            if bottleneck {
                layers.push(ConvLayer {
                    cin,
                    cout: width,
                    kernel: 1,
                    out: inp,
                    inp,
                });
                layers.push(ConvLayer {
                    cin: width,
                    cout: width,
                    kernel: 3,
                    out,
                    inp,
                });
                layers.push(ConvLayer {
                    cin: width,
                    cout,
                    kernel: 1,
                    out,
                    inp: out,
                });
            } else {
                layers.push(ConvLayer {
                    cin,
                    cout: width,
                    kernel: 3,
                    out,
                    inp,
                });
                layers.push(ConvLayer {
                    cin: width,
                    cout,
                    kernel: 3,
                    out,
                    inp: out,
                });
            }
            if b == 0 && (stride != 1 || cin != cout) {
                layers.push(ConvLayer {
                    cin,
                    cout,
                    kernel: 1,
                    out,
                    inp,
                });
            }
            cin = cout;
            side = out;
        }
    }
    layers.push(ConvLayer {
        cin,
        cout: classes,
        kernel: 1,
        out: 1,
        inp: 1,
    });
    Some(layers)
}

pub(super) fn lower_cnn(cx: &mut Ctx, c: &CnnSpec) -> Option<Cnn> {
    cx.enter_field("Cnn", None);
    let image = cx.count("image", c.image);
    let classes = cx.count("classes", c.classes);
    let CnnFamily::ResNet(depth) = c.family;
    let layers = resnet(depth, image.unwrap_or(224), classes.unwrap_or(1000));
    if layers.is_none() {
        cx.error(
            "family",
            format!("ResNet depth {depth} is not one of 18, 34, 50, 101, 152"),
            None,
        );
    }
    cx.leave();
    Some(Cnn {
        layers: layers?,
        image: image?,
        classes: classes?,
        name: format!("ResNet-{depth}"),
    })
}

#dram = #ttnn.buffer_type<dram>
#system_memory = #ttnn.buffer_type<system_memory>
#ttnn_layout = #ttnn.ttnn_layout<(d0, d1, d2, d3) -> (d0 * 3584 + d1 * 64 + d2, d3), <1x1>, memref<3584x64xbf16, #system_memory>>
#ttnn_layout1 = #ttnn.ttnn_layout<(d0, d1, d2, d3) -> (d0 * 64 + d1 * 64 + d2, d3), <1x1>, memref<2x2x!ttcore.tile<32x32, bf16>, #dram>, <interleaved>>
#ttnn_layout2 = #ttnn.ttnn_layout<(d0, d1, d2, d3) -> (d0 * 3136 + d1 * 3136 + d2, d3), <1x1>, memref<98x2x!ttcore.tile<32x32, bf16>, #dram>, <interleaved>>
#loc1 = loc("-1|unknown|unknown|-1|xla__device_data")
#loc2 = loc("/usr/local/lib/python3.11/dist-packages/transformers/models/resnet/modeling_resnet.py":52:0)
module @SyncTensorsGraph.42 attributes {mhlo.cross_program_prefetches = [], mhlo.is_dynamic = false, mhlo.use_auto_spmd_partitioning = false} {
  ttcore.device_module {
    builtin.module @SyncTensorsGraph.42 attributes {mhlo.cross_program_prefetches = [], ttcore.system_desc = #system_desc} {
      ttcore.device @default_device = <workerGrid = #ttcore.grid<8x8, (d0, d1) -> (0, d0, d1)>, l1Map = (d0, d1, d2)[s0] -> (0, d0, d1, d2 + s0), meshShape = 1x1, chipIds = [0]> loc(#loc)
      func.func private @main_const_eval_0(%arg0: tensor<64x64x1x1xbf16, #ttnn_layout> loc("-1|unknown|unknown|-1|xla__device_data")) -> tensor<1x1x64x64xbf16, #ttnn_layout1> attributes {const_eval} {
        %0 = "ttnn.get_device"() <{mesh_offset = #ttnn<mesh_offset 0x0>, mesh_shape = #ttnn<mesh_shape 1x1>}> : () -> !ttnn.device loc(#loc)
        %1 = "ttnn.prepare_conv2d_weights"(%arg0, %0) <{batch_size = 1 : i32, groups = 1 : i32, in_channels = 64 : i32, input_memory_config = #ttnn.memory_config<#dram, <interleaved>>, out_channels = 64 : i32, weights_format = "OIHW"}> : (tensor<64x64x1x1xbf16, #ttnn_layout>, !ttnn.device) -> tensor<1x1x64x64xbf16, #ttnn_layout1> loc(#loc20)
        %2 = "ttnn.to_layout"(%1) <{layout = #ttnn.layout<tile>}> : (tensor<1x1x64x64xbf16, #ttnn_layout1>) -> tensor<1x1x64x64xbf16, #ttnn_layout1> loc(#loc21)
        return %2 : tensor<1x1x64x64xbf16, #ttnn_layout1> loc(#loc)
      } loc(#loc)
      func.func @main(%arg0: tensor<64x64x1x1xbf16, #ttnn_layout> {ttcore.argument_type = #ttcore.argument_type<parameter>, ttir.name = "l__self___resnet_encoder_stages_0_layers_0_shortcut_convolution_weight"} loc("-1|unknown|unknown|-1|xla__device_data"), %arg1: tensor<1x56x56x64xbf16, #ttnn_layout> {ttcore.argument_type = #ttcore.argument_type<input>, ttir.name = "args_0"} loc(#loc1)) -> (tensor<1x1x3136x64xbf16, #ttnn_layout2> {ttir.name = "output"}) {
        %0 = ttcore.load_cached(@main_const_eval_0, [%arg0]) : (tensor<64x64x1x1xbf16, #ttnn_layout>) -> tensor<1x1x64x64xbf16, #ttnn_layout1> loc(#loc3)
        %1 = "ttnn.get_device"() <{mesh_offset = #ttnn<mesh_offset 0x0>, mesh_shape = #ttnn<mesh_shape 1x1>}> : () -> !ttnn.device loc(#loc)
        %2 = "ttnn.to_layout"(%arg1) <{dtype = #ttcore.supportedDataTypes<bf16>, layout = #ttnn.layout<tile>, memory_config = #ttnn.memory_config<#dram, <interleaved>>}> : (tensor<1x56x56x64xbf16, #ttnn_layout>) -> tensor<1x56x56x64xbf16, #ttnn_layout2> loc(#loc4)
        "ttnn.deallocate"(%arg1) <{force = false}> : (tensor<1x56x56x64xbf16, #ttnn_layout>) -> () loc(#loc4)
        %3 = "ttnn.reshape"(%2) <{shape = [1 : i32, 1 : i32, 3136 : i32, 64 : i32]}> : (tensor<1x56x56x64xbf16, #ttnn_layout2>) -> tensor<1x1x3136x64xbf16, #ttnn_layout2> loc(#loc5)
        %4 = "ttnn.conv2d"(%3, %0, %1) <{batch_size = 1 : i32, dilation = array<i32: 1, 1>, groups = 1 : i32, in_channels = 64 : i32, input_height = 56 : i32, input_width = 56 : i32, kernel_size = array<i32: 1, 1>, out_channels = 64 : i32, padding = array<i32: 0, 0, 0, 0>, stride = array<i32: 1, 1>}> : (tensor<1x1x3136x64xbf16, #ttnn_layout2>, tensor<1x1x64x64xbf16, #ttnn_layout1>, !ttnn.device) -> tensor<1x1x3136x64xbf16, #ttnn_layout2> loc(#loc6)
        "ttnn.deallocate"(%3) <{force = false}> : (tensor<1x1x3136x64xbf16, #ttnn_layout2>) -> () loc(#loc6)
        %5 = "ttnn.multiply"(%4, %4) <{dtype = #ttcore.supportedDataTypes<bf16>}> : (tensor<1x1x3136x64xbf16, #ttnn_layout2>, tensor<1x1x3136x64xbf16, #ttnn_layout2>) -> tensor<1x1x3136x64xbf16, #ttnn_layout2> loc(#loc7)
        %6 = "ttnn.add"(%5, %4) <{dtype = #ttcore.supportedDataTypes<bf16>}> : (tensor<1x1x3136x64xbf16, #ttnn_layout2>, tensor<1x1x3136x64xbf16, #ttnn_layout2>) -> tensor<1x1x3136x64xbf16, #ttnn_layout2> loc(#loc8)
        "ttnn.deallocate"(%5) <{force = false}> : (tensor<1x1x3136x64xbf16, #ttnn_layout2>) -> () loc(#loc8)
        %7 = "ttnn.relu"(%6) : (tensor<1x1x3136x64xbf16, #ttnn_layout2>) -> tensor<1x1x3136x64xbf16, #ttnn_layout2> loc(#loc9)
        "ttnn.deallocate"(%6) <{force = false}> : (tensor<1x1x3136x64xbf16, #ttnn_layout2>) -> () loc(#loc9)
        return %7 : tensor<1x1x3136x64xbf16, #ttnn_layout2> loc(#loc)
      } loc(#loc)
    } loc(#loc)
  } loc(#loc)
} loc(#loc)
#loc = loc(unknown)
#loc3 = loc("main_const_eval_0"(#loc2))
#loc4 = loc("DEBUG|12|ResNetModel[resnet]|ResNetEncoder[resnet.encoder]|/usr/local/lib/python3.11/dist-packages/transformers/models/resnet/modeling_resnet.py:52|forward|54|aten__convolution_overrideable_input_tm0"(#loc10))
#loc5 = loc("DEBUG|12|ResNetModel[resnet]|ResNetEncoder[resnet.encoder]|/usr/local/lib/python3.11/dist-packages/transformers/models/resnet/modeling_resnet.py:52|forward|54|aten__convolution_overrideable_input_tm0_tm0"(#loc4))
#loc6 = loc("DEBUG|12|ResNetModel[resnet]|ResNetEncoder[resnet.encoder]|/usr/local/lib/python3.11/dist-packages/transformers/models/resnet/modeling_resnet.py:52|forward|54|aten__convolution_overrideable"(#loc2))
#loc7 = loc(fused[#loc11, #loc12])
#loc8 = loc("DEBUG|15|ResNetModel[resnet]|ResNetEncoder[resnet.encoder]|BatchNorm2d[getattr(resnet.encoder.stages[0].layers[1].layer, '1').normalization]|/usr/local/lib/python3.11/dist-packages/transformers/models/resnet/modeling_resnet.py:52|forward|54|aten__add"(#loc2))
#loc9 = loc(callsite(#loc13 at #loc2))
#loc10 = loc("DEBUG|12|ResNetModel[resnet]|ResNetEncoder[resnet.encoder]|/usr/local/lib/python3.11/dist-packages/transformers/models/resnet/modeling_resnet.py:52|forward|54|aten__convolution"(#loc2))
#loc11 = loc("DEBUG|14|ResNetModel[resnet]|BatchNorm2d[resnet.encoder.stages.0.layers.1.normalization]|/usr/local/lib/python3.11/dist-packages/transformers/models/resnet/modeling_resnet.py:52|forward|54|aten__native_batch_norm"(#loc2))
#loc12 = loc("DEBUG|16|ResNetModel[resnet]|BatchNorm2d[resnet.encoder.stages.0.layers.1.normalization]|/usr/local/lib/python3.11/dist-packages/transformers/models/resnet/modeling_resnet.py:52|forward|54|aten__mul"(#loc2))
#loc13 = loc("DEBUG|17|ResNetModel[resnet]|ReLU[resnet.encoder.stages.0.layers.1.activation]|/usr/local/lib/python3.11/dist-packages/transformers/models/resnet/modeling_resnet.py:52|forward|55|aten__relu"(#loc2))
#loc20 = loc("DEBUG|3|ResNetModel[resnet]|Conv2d[resnet.encoder.stages.0.layers.0.shortcut.convolution]|/usr/local/lib/python3.11/dist-packages/transformers/models/resnet/modeling_resnet.py:40|forward|41|aten__convolution_weight \22OIHW\22"(#loc2))
#loc21 = loc("3|Conv2d[resnet.encoder.stages.0.layers.0.shortcut.convolution]|/usr/local/lib/python3.11/dist-packages/transformers/models/resnet/modeling_resnet.py:40|forward|41|aten__convolution_weight_layout")

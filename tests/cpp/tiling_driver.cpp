// Test driver: runs an emitted TilingFunc (linked in) on cases read from stdin and prints the result.
// Input per case: op name, aivNum, ubBytes, nInputs, then per input: present dtype rank dims... (present 2: a host
// array whose int64 values follow its dims, one per element, as a ValueDepend input's tensor carries them),
// then nAttrs and their values (OpDef order; a number, or s:TEXT for a string attribute's text), then nOutputs and their dtypes. Output per case: "ok blockDim tilingKey workspace n v0 v1 ..." where v* are
// the int64 fields of the tiling data (all opgen tiling fields are int64_t), or "fail".
#include <cstdint>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "register/op_impl_registry.h"

int main()
{
    std::string op;
    while (std::cin >> op) {
        fe::PlatFormInfos plat;
        std::cin >> plat.aivNum >> plat.ubBytes;
        gert::TilingContext ctx;
        ctx.platform = &plat;
        size_t nIn = 0;
        std::cin >> nIn;
        std::vector<std::unique_ptr<gert::StorageShape>> shapes;
        std::vector<std::unique_ptr<gert::CompileTimeTensorDesc>> descs;
        std::vector<std::vector<int64_t>> values(nIn);
        std::vector<std::unique_ptr<gert::Tensor>> tensors;
        for (size_t i = 0; i < nIn; ++i) {
            int present = 0, dt = 0;
            size_t rank = 0;
            std::cin >> present >> dt >> rank;
            std::vector<int64_t> dims(rank);
            for (auto& d : dims) std::cin >> d;
            if (present == 2) {
                values[i].resize(static_cast<size_t>(gert::Shape(dims).GetShapeSize()));
                for (auto& v : values[i]) std::cin >> v;
            }
            tensors.emplace_back(present == 2 ? new gert::Tensor(gert::Shape(dims), values[i].data())
                                              : present ? new gert::Tensor(gert::Shape(dims), nullptr)
                                                        : nullptr);
            ctx.inputTensors.push_back(tensors.back().get());
            shapes.emplace_back(present ? new gert::StorageShape(gert::Shape(dims)) : nullptr);
            descs.emplace_back(present ? new gert::CompileTimeTensorDesc(static_cast<ge::DataType>(dt)) : nullptr);
            ctx.inputShapes.push_back(shapes.back().get());
            ctx.inputDescs.push_back(descs.back().get());
        }
        size_t nAttr = 0;
        std::cin >> nAttr;
        for (size_t i = 0; i < nAttr; ++i) {
            std::string v;
            std::cin >> v;
            if (v.rfind("s:", 0) == 0) {
                ctx.attrs.SetStr(i, v.substr(2));
            } else {
                ctx.attrs.Set(i, std::stod(v));
            }
        }
        size_t nOut = 0;
        std::cin >> nOut;
        for (size_t i = 0; i < nOut; ++i) {
            int dt = 0;
            std::cin >> dt;
            descs.emplace_back(new gert::CompileTimeTensorDesc(static_cast<ge::DataType>(dt)));
            ctx.outputDescs.push_back(descs.back().get());
        }
        auto it = gert::TilingRegistry().find(op);
        if (it == gert::TilingRegistry().end() || it->second(&ctx) != ge::GRAPH_SUCCESS) {
            std::cout << "fail\n";
            continue;
        }
        const size_t n = ctx.raw.GetDataSize() / sizeof(int64_t);
        const int64_t* v = static_cast<const int64_t*>(ctx.raw.GetData());
        std::cout << "ok " << ctx.blockDim << " " << ctx.tilingKey << " " << ctx.workspace[0] << " " << n;
        for (size_t i = 0; i < n; ++i) std::cout << " " << v[i];
        std::cout << "\n";
    }
    return 0;
}

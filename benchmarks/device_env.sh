# Source me on a device machine that has torch and Triton but not this package: the wheels
# carried in .whl/ (expecttest, for the OpInfo sweeps), the `kernelscope` backend's entry
# point (so backend="kernelscope" resolves without installing), and PYTHONPATH on this tree.
#   . benchmarks/device_env.sh && python tests/models/train_h200.py gpt2 --inductor
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
mkdir -p /tmp/site/kernelscope-0.1.0.dist-info
printf 'Metadata-Version: 2.1\nName: kernelscope\nVersion: 0.1.0\n' > /tmp/site/kernelscope-0.1.0.dist-info/METADATA
printf '[torch_dynamo_backends]\nkernelscope = kernelscope.compiler:backend\n' > /tmp/site/kernelscope-0.1.0.dist-info/entry_points.txt
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1

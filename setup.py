"""pointmamba: dental intraoral-scan segmentation with a Mamba backbone over serialized points."""
from setuptools import find_packages, setup

setup(
    name="pointmamba",
    version="0.1.0",
    description="Tooth segmentation of intraoral scans with bidirectional Mamba over space-filling curves",
    python_requires=">=3.10",
    packages=find_packages(include=["pointmamba", "pointmamba.*"]),
    # the review page's template, script, style and vendored viewer (plotly.js, MIT) travel with the code
    package_data={"pointmamba.report": ["page.html", "page.js", "page.css", "vendor/*"],
                  # the shipped model and its card: a non-editable install must predict out of the box
                  "pointmamba.checkpoints": ["*.pth", "MODEL_CARD.md"]},
    # torch is pinned by the install commands (Makefile / README), not here, so that GPU users can keep
    # the CUDA build they already have; an unpinned torch on a bare machine pulls several GB of CUDA wheels.
    install_requires=[
        "torch>=2.3",  # serialization uses torch.uint16/32/64 (new in 2.3)
        "numpy>=1.24",
        "scipy>=1.10",
        "numba>=0.59",
        "tqdm>=4.60",
        "tensorboard>=2.14",
        "matplotlib>=3.7",
        "Pillow>=10.1",  # the scan pictures (inference/render.py): load_default(size=) is 10.1's
        "pyyaml>=6.0",
        "plyfile>=1.0",
        "gco-wrapper>=3.0",  # graph-cut refinement (inference/graph_cut.py); a binary wheel, nothing compiles
        "PyMaxflow>=1.3",  # the fine pass of that cut (inference/expansion.py); a binary wheel
    ],
    extras_require={
        # selenium drives Debian's chromium (apt-get install chromium chromium-driver) in the review-page
        # test, which is skipped where chromium is absent
        # triton (one 290 MB wheel, no dependencies, never touches torch; checked with 3.9.0 beside torch
        # 2.13.0 CPU) runs our Triton kernels in its interpreter on the CPU (tests/test_triton_ops.py)
        "test": ["pytest>=7", "selenium>=4.10", "triton>=3.2; sys_platform == 'linux'"],
        # CUDA builds of torch bring triton themselves; this extra is for CPU machines that run the Triton
        # kernels in Triton's interpreter (TRITON_INTERPRET=1)
        "triton": ["triton>=3.2; sys_platform == 'linux'"],
        # GPU extras are installed separately (see README "GPU install"): they compile or need CUDA.
    },
    entry_points={
        "console_scripts": [
            "pointmamba-train = pointmamba.cli.train:cli",
            "pointmamba-test = pointmamba.cli.test:cli",
            "pointmamba-predict = pointmamba.cli.predict:cli",
            "pointmamba-check-data = pointmamba.cli.check_data:cli",
            "pointmamba-export-model = pointmamba.cli.export_model:cli",
            "pointmamba-plot-distances = pointmamba.cli.plot_distances:cli",
            "pointmamba-ablate = pointmamba.cli.ablate:cli",
        ],
    },
)

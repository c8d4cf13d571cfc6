"""`traceq synth`: a simulated serving run (traceq/synth/) written as the files traceq reads."""

from __future__ import annotations

import click

from traceq.cli.common import Failure


@click.command("synth")
@click.argument("scenario")
@click.option("-o", "--output", "out_dir", help="Output directory (created; not for `list`).")
@click.option("--seed", type=int, default=1, show_default=True, help="Random seed.")
@click.option("--requests", type=int, help="Number of requests (default: the scenario's).")
@click.option("--duration", type=float, help="Arrival span in seconds (rescales the rate).")
@click.option("--convention", default="traceq", show_default=True,
              help="OTel producer convention of the traces (`traceq synth list`).")  # fmt: skip
@click.option(
    "--intensity",
    type=click.Choice(["mild", "medium", "strong"]),
    help="Fault strength (default: strong, as in sample_traces/).",
)
@click.option(
    "--window",
    metavar="START:END",
    help="Confine the fault to START–END seconds after the first arrival of a longer healthy run.",
)
@click.option(
    "--hardware",
    default="h100-8b",
    show_default=True,
    help="GPU and model profile (`traceq synth list`): h100-8b, a100-8b, l4-8b, h100x4-70b.",
)
def synth_cmd(
    scenario: str,
    out_dir: str | None,
    seed: int,
    requests: int | None,
    duration: float | None,
    convention: str,
    intensity: str | None,
    window: str | None,
    hardware: str,
) -> None:
    """Simulate SCENARIO and write its traces, log, GPU samples and labels.json to -o.

    `traceq synth list` shows the scenarios. The same seed writes identical bytes. With
    `--convention dynamo` or `llmd`, a disaggregated deployment's traces and labels.json.
    """
    from traceq.synth import CONVENTIONS, SCENARIOS, generate
    from traceq.synth.hardware import PROFILES

    if scenario == "list":
        for name, sc in SCENARIOS.items():
            click.echo(f"{name:22} {sc.description}")
        click.echo("\nconventions (--convention):")
        for name, doc in CONVENTIONS.items():
            click.echo(f"  {name:20} {doc}")
        click.echo("\nhardware (--hardware):")
        for name, profile in PROFILES.items():
            click.echo(f"  {name:20} {profile.description}")
        return
    if convention not in CONVENTIONS:
        raise Failure(f"unknown convention {convention!r}; run `traceq synth list`")
    if scenario not in SCENARIOS:
        raise Failure(f"unknown scenario {scenario!r}; run `traceq synth list`")
    if hardware not in PROFILES:
        raise Failure(f"unknown hardware {hardware!r}; run `traceq synth list`")
    if not out_dir:
        raise click.UsageError("missing option -o / --output")
    if (requests is not None and requests < 1) or (duration is not None and duration <= 0):
        raise click.UsageError("--requests and --duration must be positive")
    span = None
    if window is not None:
        try:
            lo, hi = (float(x) for x in window.split(":"))
        except ValueError:
            raise click.UsageError(f"--window {window!r}: expected START:END in seconds") from None
        span = (lo, hi)
    try:
        labels = generate(
            scenario,
            out_dir,
            seed=seed,
            requests=requests,
            duration_s=duration,
            intensity=intensity,
            window=span,
            convention=convention,
            hardware=hardware,
        )
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    t = labels["truth"]
    level = f" ({labels['intensity']})" if labels["intensity"] else ""
    click.echo(
        f"{scenario}{level}: {t['requests']:,} requests, {t['output_tokens']:,} output tokens, "
        f"{t['preemptions']:,} preemptions → {out_dir}"
    )
    if "disagg" in labels:
        d = labels["disagg"]
        click.echo(
            f"{convention}: {d['gateway']}, {len(d['prefill_pool'])} prefill and "
            f"{len(d['decode_pool'])} decode workers; {d['served']:,} requests served, "
            f"{d['lost']:,} failed at the gateway; clock of {', '.join(d['skew']['instances'])} "
            f"+{d['skew']['offset_ms']:.3f} ms (labels.json: disagg)"
        )

"""The demo library's sample papers: short texts written for the demo, typeset into PDFs.

They are not real publications (the author list says so); they give the Binder demo a
library to parse, read and search with no network and no API key.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SamplePaper:
    slug: str
    title: str
    authors: tuple[str, ...]
    year: int
    abstract: str
    sections: tuple[tuple[str, str], ...]  # (heading, body paragraphs separated by blank lines)
    references: tuple[str, ...]


DEMO_AUTHORS = ("Demo Author (sample text)", "Example Author (sample text)")

SAMPLE_PAPERS: tuple[SamplePaper, ...] = (
    SamplePaper(
        slug="demo-mw-halo-mass",
        title="The Mass of the Milky Way Halo beyond 100 kpc from Satellite Kinematics",
        authors=DEMO_AUTHORS,
        year=2024,
        abstract=(
            "We summarise how the kinematics of distant halo tracers constrain the mass of the Milky Way "
            "beyond 100 kpc. Line-of-sight velocities and proper motions of satellite galaxies and distant "
            "globular clusters, combined with a spherical Jeans analysis, give a virial mass of roughly one "
            "trillion solar masses with an uncertainty of about thirty per cent."
        ),
        sections=(
            (
                "1 Introduction",
                "The total mass of the Milky Way sets the context for nearly every question about our Galaxy, "
                "from the orbits of the Magellanic Clouds to the expected number of satellite galaxies. Beyond "
                "100 kpc few luminous tracers remain, so the mass estimate depends on a small number of distant "
                "satellites and globular clusters.\n\n"
                "Different methods disagree at the factor-of-two level: escape-velocity arguments, the timing "
                "argument with Andromeda, and tracer kinematics each carry their own systematic errors.",
            ),
            (
                "2 Data",
                "We use line-of-sight velocities for twenty-eight satellite galaxies and proper motions measured "
                "by the Gaia mission for most of them. Distances come from the tip of the red giant branch and "
                "from RR Lyrae stars, with typical errors of five per cent.\n\n"
                "Leo I, at a distance of about 250 kpc, dominates the mass estimate because of its large radial "
                "velocity; we repeat the analysis without it to test whether it is bound.",
            ),
            (
                "3 Method",
                "The spherical Jeans equation relates the enclosed mass to the radial velocity dispersion, its "
                "logarithmic slope, the tracer density profile and the velocity anisotropy parameter beta. "
                "Proper motions break the mass-anisotropy degeneracy that line-of-sight velocities alone leave "
                "open.\n\n"
                "We model the tracer density as a power law in radius and fit the enclosed mass within 100 kpc "
                "and the virial mass with a Markov chain Monte Carlo sampler.",
            ),
            (
                "4 Results",
                "The mass enclosed within 100 kpc is about six hundred billion solar masses. Extrapolated with "
                "an NFW profile, the virial mass is about one trillion solar masses, with an uncertainty of "
                "roughly thirty per cent dominated by the anisotropy and by whether Leo I is bound.\n\n"
                "Excluding Leo I lowers the virial mass by about twenty per cent, within the quoted uncertainty.",
            ),
            (
                "5 Discussion",
                "The main systematic errors are the assumption of equilibrium, since the Large Magellanic Cloud "
                "perturbs the outer halo, and the choice of tracer density profile. Stellar streams at large "
                "radii offer an independent constraint that does not assume equilibrium.",
            ),
        ),
        references=(
            "Sample reference list for the demo; see ADS for the literature on halo mass estimates.",
        ),
    ),
    SamplePaper(
        slug="demo-hot-jupiter-atmospheres",
        title="Transmission Spectroscopy of Hot Jupiter Atmospheres: Water, Clouds and Hazes",
        authors=DEMO_AUTHORS,
        year=2023,
        abstract=(
            "Transmission spectra of hot Jupiters measure the wavelength dependence of the planet's apparent "
            "radius during transit. We review how water absorption at 1.4 micron, sodium and potassium lines, "
            "and the slope of Rayleigh scattering by hazes reveal atmospheric composition and cloud cover."
        ),
        sections=(
            (
                "1 Introduction",
                "Hot Jupiters are gas giants on orbits of a few days, with equilibrium temperatures above 1000 K. "
                "Their extended atmospheres and large radii make them the easiest exoplanets to characterise.",
            ),
            (
                "2 Observations",
                "Space-based spectrographs measure the transit depth in many wavelength channels. The amplitude "
                "of a spectral feature is about the atmospheric scale height times the number of scale heights "
                "probed, divided by the stellar radius squared.\n\n"
                "Stellar activity, in particular unocculted starspots, can mimic a scattering slope and must be "
                "corrected with contemporaneous photometric monitoring.",
            ),
            (
                "3 Results",
                "Water absorption at 1.4 micron is detected in most clear atmospheres but is muted in cloudy "
                "planets. High-altitude clouds flatten the spectrum, while small haze particles produce a steep "
                "blue slope from Rayleigh scattering.\n\n"
                "Sodium and potassium line cores probe the upper atmosphere and constrain temperature profiles.",
            ),
            (
                "4 Conclusions",
                "Clear and cloudy hot Jupiters form a continuum; the amplitude of the water feature correlates "
                "with equilibrium temperature and surface gravity.",
            ),
        ),
        references=("Sample reference list for the demo.",),
    ),
    SamplePaper(
        slug="demo-m31-rotation-curve",
        title="The Rotation Curve of M 31 from HI 21 cm Observations",
        authors=DEMO_AUTHORS,
        year=2022,
        abstract=(
            "We describe how the rotation curve of the Andromeda galaxy, M 31, is measured from neutral "
            "hydrogen 21 cm emission and what it implies for its dark matter halo. The curve stays flat at "
            "about 230 km/s out to 35 kpc, requiring a dark halo that dominates beyond 15 kpc."
        ),
        sections=(
            (
                "1 Introduction",
                "Andromeda is the nearest large spiral galaxy, at a distance of about 780 kpc. Its extended HI "
                "disc traces the gravitational potential far beyond the optical radius.",
            ),
            (
                "2 Observations",
                "Interferometric 21 cm maps give velocity fields with a resolution of a few hundred parsecs. "
                "A tilted-ring model fits the inclination, position angle and rotation velocity ring by ring; "
                "the warp of the outer disc must be modelled to avoid biased velocities.",
            ),
            (
                "3 Mass Model",
                "The rotation curve is decomposed into bulge, stellar disc, gas disc and dark halo contributions. "
                "Stellar mass-to-light ratios from population synthesis fix the baryonic part; the remaining "
                "velocity requires a dark halo with a virial mass of about one trillion solar masses.",
            ),
            (
                "4 Conclusions",
                "The flat outer rotation curve of M 31 is well fitted by an NFW halo; a cored profile fits "
                "equally well within the uncertainties of the stellar mass-to-light ratio.",
            ),
        ),
        references=("Sample reference list for the demo.",),
    ),
)

package privacy

// STUB samplers: replaced by the sampler work (issue 3).

// Sample implements Mechanism.
func (m Laplace) Sample(s *Stream, scale float64) float64 { return 0 }

// Sample implements Mechanism.
func (m Logistic) Sample(s *Stream, scale float64) float64 { return 0 }

// Sample implements Mechanism.
func (m Gaussian) Sample(s *Stream, scale float64) float64 { return 0 }

// Sample implements Mechanism.
func (m GaussianClassic) Sample(s *Stream, scale float64) float64 { return 0 }

// Sample implements Mechanism.
func (m Subbotin) Sample(s *Stream, scale float64) float64 { return 0 }

// Sample implements Mechanism.
func (m Cauchy) Sample(s *Stream, scale float64) float64 { return 0 }

// Sample implements Mechanism.
func (m Stable) Sample(s *Stream, scale float64) float64 { return 0 }

// Sample implements Mechanism.
func (m DiscreteLaplace) Sample(s *Stream, scale float64) float64 { return 0 }

// Sample implements Mechanism.
func (m DiscreteGaussian) Sample(s *Stream, scale float64) float64 { return 0 }

package certs

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
)

// KeyType is the kind of a certificate's key.
type KeyType string

// The key types. ECDSA P-256 is the default: fast to generate and to
// handshake with, and what every TLS 1.3 stack supports.
const (
	KeyECDSAP256 KeyType = "ecdsa-p256"
	KeyECDSAP384 KeyType = "ecdsa-p384"
	KeyEd25519   KeyType = "ed25519"
	KeyRSA2048   KeyType = "rsa-2048"
)

// MaxPEMBytes bounds a certificate or key file read back: they are a few
// KiB, and a wrong path (a log, a database) must not be read whole.
const MaxPEMBytes = 1 << 20

func (k KeyType) norm() KeyType {
	if k == "" {
		return KeyECDSAP256
	}
	return k
}

func (k KeyType) check(field string) error {
	switch k.norm() {
	case KeyECDSAP256, KeyECDSAP384, KeyEd25519, KeyRSA2048:
		return nil
	}
	return fmt.Errorf("%w: %s: %q is not one of %s, %s, %s, %s (or empty for %s)",
		ErrInvalid, field, string(k), KeyECDSAP256, KeyECDSAP384, KeyEd25519, KeyRSA2048, KeyECDSAP256)
}

func (k KeyType) generate() (crypto.Signer, error) {
	var key crypto.Signer
	var err error
	switch k.norm() {
	case KeyECDSAP256:
		key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case KeyECDSAP384:
		key, err = ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	case KeyEd25519:
		_, key, err = ed25519.GenerateKey(rand.Reader)
	case KeyRSA2048:
		key, err = rsa.GenerateKey(rand.Reader, 2048)
	default:
		return nil, k.check("KeyType")
	}
	if err != nil {
		return nil, fmt.Errorf("certs: generate %s key: %w", k.norm(), err)
	}
	return key, nil
}

func encodeCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// encodeKey writes PKCS#8, the one encoding for every key type.
func encodeKey(key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("certs: encode key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// readBounded reads at most MaxPEMBytes of path.
func readBounded(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("certs: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxPEMBytes+1))
	if err != nil {
		return nil, fmt.Errorf("certs: read %s: %w", path, err)
	}
	if len(b) > MaxPEMBytes {
		return nil, fmt.Errorf("certs: %s: larger than %d bytes, not a PEM certificate or key", path, MaxPEMBytes)
	}
	return b, nil
}

// readCert reads the first certificate of a PEM file.
func readCert(path string) (*x509.Certificate, []byte, error) {
	b, err := readBounded(path)
	if err != nil {
		return nil, nil, err
	}
	for rest := b; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return nil, nil, fmt.Errorf("certs: %s: no PEM CERTIFICATE block", path)
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, nil, fmt.Errorf("certs: %s: %w", path, err)
		}
		return cert, encodeCert(block.Bytes), nil
	}
}

// readKey reads a private key: PKCS#8 as written here, or the PKCS#1 and
// SEC 1 encodings other tools (openssl) write.
func readKey(path string) (crypto.Signer, error) {
	b, err := readBounded(path)
	if err != nil {
		return nil, err
	}
	for rest := b; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return nil, fmt.Errorf("certs: %s: no PEM private key block", path)
		}
		var key any
		switch block.Type {
		case "PRIVATE KEY":
			key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
		case "EC PRIVATE KEY":
			key, err = x509.ParseECPrivateKey(block.Bytes)
		case "RSA PRIVATE KEY":
			key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
		default:
			continue // EC PARAMETERS and the like
		}
		if err != nil {
			return nil, fmt.Errorf("certs: %s: %w", path, err)
		}
		signer, ok := key.(crypto.Signer)
		if !ok {
			return nil, fmt.Errorf("certs: %s: a %T cannot sign", path, key)
		}
		return signer, nil
	}
}

// matchKey checks that key is the private half of cert's public key.
func matchKey(cert *x509.Certificate, key crypto.Signer) error {
	pub, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(cert.PublicKey) {
		return errors.New("the key does not match the certificate")
	}
	return nil
}

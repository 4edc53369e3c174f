package s3

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/minio/minio-go/v7"

	"github.com/modelgate/modelgate/loader"
)

func TestChooseCredentials(t *testing.T) {
	const home = "/home/u"
	defaultFile := home + "/.aws/credentials"
	tests := map[string]struct {
		env     map[string]string
		files   []string // files that exist
		want    credPlan
		wantErr error
	}{
		"nothing configured: instance metadata": {
			env:  map[string]string{},
			want: credPlan{Kind: credIMDS, IMDSEndpoint: "http://169.254.169.254"},
		},
		"instance metadata elsewhere": {
			env:  map[string]string{"AWS_EC2_METADATA_SERVICE_ENDPOINT": "http://[fd00:ec2::254]/"},
			want: credPlan{Kind: credIMDS, IMDSEndpoint: "http://[fd00:ec2::254]"},
		},
		"instance metadata disabled: anonymous": {
			env:  map[string]string{"AWS_EC2_METADATA_DISABLED": "TRUE"},
			want: credPlan{Kind: credAnonymous, Reason: "no credentials configured and AWS_EC2_METADATA_DISABLED=true"},
		},
		"no sign request wins over keys": {
			env:  map[string]string{"AWS_NO_SIGN_REQUEST": "true", "AWS_ACCESS_KEY_ID": "id", "AWS_SECRET_ACCESS_KEY": "hush-sk"},
			want: credPlan{Kind: credAnonymous, Reason: "AWS_NO_SIGN_REQUEST=true"},
		},
		"static keys win over everything else": {
			env: map[string]string{
				"AWS_ACCESS_KEY_ID": "id", "AWS_SECRET_ACCESS_KEY": "hush-sk", "AWS_SESSION_TOKEN": "hush-st",
				"AWS_WEB_IDENTITY_TOKEN_FILE": "/t", "AWS_ROLE_ARN": "arn:r",
				"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "/v2/creds", "AWS_PROFILE": "p", "HOME": home,
			},
			want: credPlan{Kind: credStatic, AccessKeyID: "id", SecretAccessKey: "hush-sk", SessionToken: "hush-st", KeyVars: standardKeys},
		},
		"a Secret's accessKey and secretKey": {
			env:  map[string]string{"accessKey": "id", "secretKey": "hush-sk"},
			want: credPlan{Kind: credStatic, AccessKeyID: "id", SecretAccessKey: "hush-sk", KeyVars: keyAliases[2]},
		},
		"the credentials file's names, with a session token": {
			env: map[string]string{"aws_access_key_id": "id", "aws_secret_access_key": "hush-sk", "aws_session_token": "hush-st"},
			want: credPlan{Kind: credStatic, AccessKeyID: "id", SecretAccessKey: "hush-sk", SessionToken: "hush-st",
				KeyVars: keyNames{ID: "aws_access_key_id", Secret: "aws_secret_access_key", Token: "aws_session_token"}},
		},
		"the AWS variables win over a Secret's names": {
			env:  map[string]string{"AWS_ACCESS_KEY_ID": "id", "AWS_SECRET_ACCESS_KEY": "hush-sk", "accessKey": "other", "secretKey": "hush-other"},
			want: credPlan{Kind: credStatic, AccessKeyID: "id", SecretAccessKey: "hush-sk", KeyVars: standardKeys},
		},
		"a half of the AWS variables is still an error": {
			env:     map[string]string{"AWS_ACCESS_KEY_ID": "id", "accessKey": "other", "secretKey": "hush-other"},
			wantErr: loader.ErrInvalid,
		},
		"only whole pairs, in order": {
			env: map[string]string{
				"access_key_id": "half", "secretKey": "hush-half",
				"accesskey": "id", "secretkey": "hush-sk", "sessionToken": "hush-not-its-own",
			},
			want: credPlan{Kind: credStatic, AccessKeyID: "id", SecretAccessKey: "hush-sk", KeyVars: keyAliases[3]},
		},
		"a Secret's keys win over web identity": {
			env:  map[string]string{"access_key_id": "id", "secret_access_key": "hush-sk", "AWS_WEB_IDENTITY_TOKEN_FILE": "/t", "AWS_ROLE_ARN": "arn:r"},
			want: credPlan{Kind: credStatic, AccessKeyID: "id", SecretAccessKey: "hush-sk", KeyVars: keyAliases[1]},
		},
		"a lone half of a Secret's pair is ignored": {
			env:  map[string]string{"accessKey": "id"},
			want: credPlan{Kind: credIMDS, IMDSEndpoint: "http://169.254.169.254"},
		},
		"key id without secret": {
			env:     map[string]string{"AWS_ACCESS_KEY_ID": "id"},
			wantErr: loader.ErrInvalid,
		},
		"secret without key id": {
			env:     map[string]string{"AWS_SECRET_ACCESS_KEY": "hush-sk"},
			wantErr: loader.ErrInvalid,
		},
		"web identity (IRSA) with the regional STS": {
			env: map[string]string{
				"AWS_WEB_IDENTITY_TOKEN_FILE": "/var/run/secrets/eks.amazonaws.com/serviceaccount/token",
				"AWS_ROLE_ARN":                "arn:aws:iam::1:role/r", "AWS_REGION": "eu-west-1",
				"AWS_CONTAINER_CREDENTIALS_FULL_URI": "http://169.254.170.23/v1/credentials",
			},
			want: credPlan{
				Kind: credWebIdentity, TokenFile: "/var/run/secrets/eks.amazonaws.com/serviceaccount/token",
				RoleARN: "arn:aws:iam::1:role/r", STSEndpoint: "https://sts.eu-west-1.amazonaws.com",
			},
		},
		"web identity in China": {
			env:  map[string]string{"AWS_WEB_IDENTITY_TOKEN_FILE": "/t", "AWS_ROLE_ARN": "arn:r", "AWS_DEFAULT_REGION": "cn-north-1"},
			want: credPlan{Kind: credWebIdentity, TokenFile: "/t", RoleARN: "arn:r", STSEndpoint: "https://sts.cn-north-1.amazonaws.com.cn"},
		},
		"web identity with an STS endpoint": {
			env: map[string]string{
				"AWS_WEB_IDENTITY_TOKEN_FILE": "/t", "AWS_ROLE_ARN": "arn:r",
				"AWS_ENDPOINT_URL": "http://minio:9000", "AWS_ENDPOINT_URL_STS": "http://sts:8080",
			},
			want: credPlan{Kind: credWebIdentity, TokenFile: "/t", RoleARN: "arn:r", STSEndpoint: "http://sts:8080"},
		},
		"web identity token without a role": {
			env:     map[string]string{"AWS_WEB_IDENTITY_TOKEN_FILE": "/t"},
			wantErr: loader.ErrInvalid,
		},
		"EKS Pod Identity": {
			env: map[string]string{
				"AWS_CONTAINER_CREDENTIALS_FULL_URI":     "http://169.254.170.23/v1/credentials",
				"AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE": "/var/run/secrets/pods.eks.amazonaws.com/serviceaccount/eks-pod-identity-token",
				"AWS_CONTAINER_AUTHORIZATION_TOKEN":      "hush-ignored",
				"AWS_PROFILE":                            "p", "HOME": home,
			},
			want: credPlan{
				Kind: credContainer, URI: "http://169.254.170.23/v1/credentials", URIVar: "AWS_CONTAINER_CREDENTIALS_FULL_URI",
				AuthTokenFile: "/var/run/secrets/pods.eks.amazonaws.com/serviceaccount/eks-pod-identity-token",
			},
		},
		"ECS task role": {
			env: map[string]string{"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "/v2/credentials/abc"},
			want: credPlan{
				Kind: credContainer, URI: "http://169.254.170.2/v2/credentials/abc", URIVar: "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
			},
		},
		"container credentials on loopback with a token": {
			env:  map[string]string{"AWS_CONTAINER_CREDENTIALS_FULL_URI": "http://127.0.0.1:51679/creds", "AWS_CONTAINER_AUTHORIZATION_TOKEN": "hush-tok"},
			want: credPlan{Kind: credContainer, URI: "http://127.0.0.1:51679/creds", URIVar: "AWS_CONTAINER_CREDENTIALS_FULL_URI", AuthToken: "hush-tok"},
		},
		"container credentials over https anywhere": {
			env:  map[string]string{"AWS_CONTAINER_CREDENTIALS_FULL_URI": "https://creds.example.com/x"},
			want: credPlan{Kind: credContainer, URI: "https://creds.example.com/x", URIVar: "AWS_CONTAINER_CREDENTIALS_FULL_URI"},
		},
		"container credentials over http to another host": {
			env:     map[string]string{"AWS_CONTAINER_CREDENTIALS_FULL_URI": "http://creds.example.com/x"},
			wantErr: loader.ErrInvalid,
		},
		"shared file named": {
			env:  map[string]string{"AWS_SHARED_CREDENTIALS_FILE": "/etc/aws/creds"},
			want: credPlan{Kind: credSharedFile, File: "/etc/aws/creds", Profile: "default"},
		},
		"shared file by profile, default path": {
			env:  map[string]string{"AWS_PROFILE": "models", "HOME": home},
			want: credPlan{Kind: credSharedFile, File: defaultFile, Profile: "models"},
		},
		"default shared file when it exists": {
			env:   map[string]string{"HOME": home},
			files: []string{defaultFile},
			want:  credPlan{Kind: credSharedFile, File: defaultFile, Profile: "default"},
		},
		"no default shared file: instance metadata": {
			env:  map[string]string{"HOME": home},
			want: credPlan{Kind: credIMDS, IMDSEndpoint: "http://169.254.169.254"},
		},
		"profile without any file": {
			env:     map[string]string{"AWS_PROFILE": "p"},
			wantErr: loader.ErrInvalid,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			exists := func(name string) bool {
				for _, f := range tc.files {
					if f == name {
						return true
					}
				}
				return false
			}
			got, err := chooseCredentials(envOf(tc.env), exists)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("error %v, want %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
			if s := got.String(); strings.Contains(s, "hush") {
				t.Errorf("description %q shows a secret", s)
			}
		})
	}
}

func TestResolveEndpoint(t *testing.T) {
	tests := map[string]struct {
		env     map[string]string
		want    endpoint
		wantErr error
	}{
		"AWS, region unknown": {
			env:  map[string]string{},
			want: endpoint{Host: "s3.amazonaws.com", Secure: true},
		},
		"AWS in a region, dual stack": {
			env:  map[string]string{"AWS_DEFAULT_REGION": "eu-central-1", "AWS_USE_DUALSTACK_ENDPOINT": "true"},
			want: endpoint{Host: "s3.amazonaws.com", Secure: true, Region: "eu-central-1", Dualstack: true},
		},
		"AWS_REGION wins": {
			env:  map[string]string{"AWS_REGION": "us-west-2", "AWS_DEFAULT_REGION": "eu-central-1"},
			want: endpoint{Host: "s3.amazonaws.com", Secure: true, Region: "us-west-2"},
		},
		"local store over plain http": {
			env:  map[string]string{"AWS_ENDPOINT_URL": "http://minio.storage:9000/"},
			want: endpoint{Host: "minio.storage:9000", Region: "us-east-1"},
		},
		"service endpoint wins, path style forced": {
			env: map[string]string{
				"AWS_ENDPOINT_URL": "http://wrong", "AWS_ENDPOINT_URL_S3": "https://s3.example.com",
				"AWS_REGION": "auto", "AWS_S3_FORCE_PATH_STYLE": "true",
			},
			want: endpoint{Host: "s3.example.com", Secure: true, Region: "auto", Lookup: minio.BucketLookupPath},
		},
		"host without a scheme is https": {
			env:  map[string]string{"AWS_ENDPOINT_URL_S3": "ceph.local:7480"},
			want: endpoint{Host: "ceph.local:7480", Secure: true, Region: "us-east-1"},
		},
		"an endpoint with a path": {
			env:     map[string]string{"AWS_ENDPOINT_URL_S3": "https://s3.example.com/bucket"},
			wantErr: loader.ErrInvalid,
		},
		"an endpoint with another scheme": {
			env:     map[string]string{"AWS_ENDPOINT_URL_S3": "ftp://s3.example.com"},
			wantErr: loader.ErrInvalid,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := resolveEndpoint(envOf(tc.env))
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("error %v, want %v", err, tc.wantErr)
			}
			if tc.wantErr != nil {
				return
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("endpoint (-want +got):\n%s", diff)
			}
		})
	}
}
